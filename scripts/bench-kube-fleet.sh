#!/usr/bin/env bash
# A big Kubernetes cluster's memory (issue 28): kube-lab (the tests' API
# server stand-in, `examples/kube-lab.rs`) serving $NODES GPU nodes and
# $PODS pods shaped as a real API server returns them (managed fields,
# kubectl's last-applied copy, container images, env, probes, mounts,
# volumes, the images each node has pulled), and nightshift reading them:
#   - `get nodes -o json`: wall time and peak RSS;
#   - the console: time to its first full screen, then its RSS and CPU.
#
#   scripts/bench-kube-fleet.sh        # NODES=5000 PODS=40000 WINDOW=30
#   NS=/path/to/other/nightshift scripts/bench-kube-fleet.sh   # another build
#   SERVE_ONLY=1 scripts/bench-kube-fleet.sh   # the loaded lab alone
#
# Needs tmux and python3. Prints markdown; docs/performance.md has results.
set -euo pipefail
cd "$(dirname "$0")/.."
NODES=${NODES:-5000}
PODS=${PODS:-40000}
WINDOW=${WINDOW:-30}
cargo build --release --quiet --example kube-lab
cargo build --release --quiet
NS=${NS:-$PWD/target/release/nightshift}
LAB=$PWD/target/release/examples/kube-lab
source scripts/bench-lib.sh
bench_work ns-kube
SESSIONS=(nskube)

mkdir -p "$WORK/objects"
python3 - "$NODES" "$PODS" "$WORK/objects" <<'EOF'
import json, sys
nodes, pods, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
ts = "2026-11-20T10:00:00Z"
def managed(manager):
    return [{"manager": manager, "operation": "Update", "apiVersion": "v1", "time": ts,
             "fieldsType": "FieldsV1",
             "fieldsV1": {"f:metadata": {"f:labels": {f"f:l{i}": {} for i in range(12)}},
                          "f:status": {"f:conditions": {f'k:{{"type":"C{i}"}}': {".": {}, "f:status": {}} for i in range(6)}}}}]
items = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}}]
for n in range(nodes):
    name = f"gpu-{n:05d}"
    items.append({"apiVersion": "v1", "kind": "Node",
      "metadata": {"name": name, "creationTimestamp": ts, "uid": f"node-{n}",
        "labels": {"kubernetes.io/hostname": name, "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
                   "nvidia.com/gpu.count": "8", "nvidia.com/gpu.present": "true",
                   "topology.kubernetes.io/zone": "us-east-1a", "cloud.provider.com/topology-block": f"block-{n // 64}",
                   "node.kubernetes.io/instance-type": "p5.48xlarge", "kubernetes.io/os": "linux"},
        "annotations": {"node.alpha.kubernetes.io/ttl": "0", "volumes.kubernetes.io/controller-managed-attach-detach": "true"},
        "managedFields": managed("kubelet")},
      "spec": {"podCIDR": f"10.{n // 250}.{n % 250}.0/24", "providerID": f"aws:///us-east-1a/i-{n:08x}"},
      "status": {"capacity": {"cpu": "192", "memory": "2097152Mi", "nvidia.com/gpu": "8", "pods": "110"},
        "allocatable": {"cpu": "191", "memory": "2086912Mi", "nvidia.com/gpu": "8", "pods": "110"},
        "conditions": [{"type": t, "status": "False" if t != "Ready" else "True", "reason": f"Kubelet{t}",
                        "message": f"kubelet reports {t}", "lastHeartbeatTime": ts, "lastTransitionTime": ts}
                       for t in ["MemoryPressure", "DiskPressure", "PIDPressure", "Ready"]],
        "addresses": [{"type": "InternalIP", "address": f"10.0.{n // 250}.{n % 250}"}, {"type": "Hostname", "address": name}],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
        "nodeInfo": {"machineID": f"{n:032x}", "systemUUID": f"{n:032x}", "bootID": f"boot-{n}",
                     "kernelVersion": "6.1.0-27-amd64", "osImage": "Debian GNU/Linux 12", "containerRuntimeVersion": "containerd://1.7.22",
                     "kubeletVersion": "v1.32.0", "kubeProxyVersion": "v1.32.0", "operatingSystem": "linux", "architecture": "amd64"},
        "images": [{"names": [f"nvcr.io/nvidia/pytorch@sha256:{i:064x}", f"nvcr.io/nvidia/pytorch:24.{i:02d}-py3"], "sizeBytes": 9_000_000_000 + i}
                   for i in range(30)]}})
per_job = 8
for p in range(pods):
    node = f"gpu-{p * nodes // pods:05d}"
    job = f"train-{p // per_job:05d}"
    items.append({"apiVersion": "v1", "kind": "Pod",
      "metadata": {"name": f"{job}-{p % per_job}", "namespace": "ml", "uid": f"pod-{p}", "creationTimestamp": ts,
        "labels": {"job-name": job, "batch.kubernetes.io/job-name": job, "controller-uid": f"job-{p // per_job}",
                   "kueue.x-k8s.io/queue-name": "team-a"},
        "annotations": {"kubectl.kubernetes.io/last-applied-configuration": json.dumps({"spec": {"containers": [{"name": "main", "image": "nvcr.io/nvidia/pytorch:24.10-py3", "env": [{"name": f"E{i}", "value": "x" * 40} for i in range(20)]}]}})},
        "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": job, "uid": f"job-{p // per_job}", "controller": True, "blockOwnerDeletion": True}],
        "managedFields": managed("kube-controller-manager")},
      "spec": {"nodeName": node, "schedulerName": "default-scheduler", "priority": 0, "restartPolicy": "Never",
        "serviceAccountName": "default", "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
        "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": f"data-{job}"}},
                    {"name": "kube-api-access", "projected": {"sources": [{"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}}]}}],
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "containers": [{"name": "main", "image": "nvcr.io/nvidia/pytorch:24.10-py3",
                        "command": ["torchrun", "--nnodes=4", "--nproc-per-node=8", "train.py"],
                        "args": ["--config", "/etc/train/config.yaml", "--checkpoint-dir", "/data/ckpt"],
                        "env": [{"name": f"E{i}", "value": "x" * 40} for i in range(20)],
                        "resources": {"limits": {"nvidia.com/gpu": "1"}, "requests": {"nvidia.com/gpu": "1", "cpu": "8"}},
                        "volumeMounts": [{"name": "data", "mountPath": "/data"}, {"name": "kube-api-access", "mountPath": "/var/run/secrets", "readOnly": True}],
                        "livenessProbe": {"exec": {"command": ["cat", "/tmp/alive"]}, "periodSeconds": 30},
                        "terminationMessagePath": "/dev/termination-log", "imagePullPolicy": "IfNotPresent"}]},
      "status": {"phase": "Running", "qosClass": "Burstable", "startTime": ts, "hostIP": "10.0.0.1", "podIP": f"10.1.{p // 250 % 250}.{p % 250}",
        "conditions": [{"type": t, "status": "True", "lastTransitionTime": ts} for t in ["Initialized", "Ready", "ContainersReady", "PodScheduled"]],
        "containerStatuses": [{"name": "main", "ready": True, "restartCount": 0, "started": True,
                               "image": "nvcr.io/nvidia/pytorch:24.10-py3", "imageID": "nvcr.io/nvidia/pytorch@sha256:" + "a" * 64,
                               "containerID": "containerd://" + "b" * 64, "state": {"running": {"startedAt": ts}}}]}})
with open(f"{out}/all.json", "w") as f:
    json.dump({"apiVersion": "v1", "kind": "List", "items": items}, f)
EOF
echo "objects: $(du -h "$WORK/objects/all.json" | cut -f1), $NODES nodes, $PODS pods" >&2
PORT=$(free_port)
"$LAB" --objects "$WORK/objects" --listen "127.0.0.1:$PORT" --write-kubeconfig "$WORK/kubeconfig" >/dev/null 2>&1 &
PIDS+=($!)
for _ in $(seq 1 600); do [ -s "$WORK/kubeconfig" ] && curl -sf "http://127.0.0.1:$PORT/version" >/dev/null && break; sleep 0.5; done

# SERVE_ONLY=1: keep the loaded lab up for a look by hand (ctrl-c ends it).
if [ "${SERVE_ONLY:-0}" = 1 ]; then
  echo "kube-lab: --kubeconfig $WORK/kubeconfig" >&2
  sleep infinity
fi

echo
echo "### \`get nodes -o json\` ($NODES nodes, $PODS pods)"
echo
echo "| run | wall s | peak RSS MB | nodes |"
echo "|---|---|---|---|"
for i in 1 2; do
  t0=$(now)
  /usr/bin/time -f '%M' -o "$WORK/time" "$NS" --source kube --kubeconfig "$WORK/kubeconfig" \
    --log-file "$WORK/cli.log" get nodes -o json > "$WORK/nodes.json"
  t1=$(now)
  n=$(python3 -c "import json; print(len(json.load(open('$WORK/nodes.json'))['items']))")
  echo "| $i | $(python3 -c "print(f'{$t1 - $t0:.1f}')") | $(( $(tail -1 "$WORK/time") / 1024 )) | $n |"
done

echo
echo "### The console (\`nightshift --source kube\`, 200×50 tmux pane)"
echo
t0=$(now)
tmux new-session -d -s nskube -x 200 -y 50 "$NS --source kube --kubeconfig $WORK/kubeconfig --log-file $WORK/tui.log"
first=""
for _ in $(seq 1 1200); do
  # The jobs' count in the overview: every pod mapped.
  if tmux capture-pane -p -t nskube | grep -q "gpu-0"; then first=$(python3 -c "print(f'{$(now) - $t0:.2f}')"); break; fi
  sleep 0.05
done
TUI=$(pgrep -n -f "^$NS --source kube")
sleep 5
c0=$(cpu "$TUI"); r0=$(rss_mb "$TUI"); peak=$r0
for _ in $(seq 1 "$WINDOW"); do
  sleep 1
  r=$(rss_mb "$TUI"); [ "$r" -gt "$peak" ] && peak=$r
done
c1=$(cpu "$TUI"); r1=$(rss_mb "$TUI")
echo "| | |"
echo "|---|---|"
echo "| first screen with the nodes | ${first:-never} s |"
echo "| resident 5 s after / ${WINDOW} s later / peak | $r0 / $r1 / $peak MB |"
echo "| CPU over ${WINDOW} s | $(python3 -c "print(f'{($c1 - $c0) / $WINDOW * 100:.1f}')") % of a core |"
tmux capture-pane -p -t nskube | head -4 >&2
