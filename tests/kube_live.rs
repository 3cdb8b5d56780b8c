//! nightshift on Kubernetes, against the kube-lab API server (a stand-in:
//! no real kube-apiserver can run on these machines), which the real
//! `kubectl` checks in each test: what kubectl sees and does, nightshift
//! must see and do the same.

mod common;

use common::kube::KubeLab;
use common::require;
use serde_json::Value;
use std::collections::BTreeMap;
use std::time::Duration;

const KUBECTL_HINT: &str =
    "the machine image ships kubectl; else apt-get install kubernetes-client";

fn kubectl_here() -> bool {
    require("kubectl", KUBECTL_HINT)
}

fn items(v: &Value) -> Vec<Value> {
    v["items"].as_array().cloned().unwrap_or_default()
}

fn get(lab: &KubeLab, what: &str) -> Vec<Value> {
    let out = lab.nightshift(&["get", what, "-o", "json"]);
    assert!(
        out.status.success(),
        "get {what}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    items(&serde_json::from_slice(&out.stdout).expect("json"))
}

fn text(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The GPUs a pod asks for, as kubectl prints it.
fn pod_gpus(p: &Value) -> u64 {
    p["spec"]["containers"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|c| c["resources"]["limits"].as_object().into_iter().flatten())
        .filter(|(k, _)| k.starts_with("nvidia.com/gpu") || k.starts_with("nvidia.com/mig-"))
        .filter_map(|(_, v)| v.as_str()?.parse::<u64>().ok())
        .sum()
}

#[test]
fn nightshift_sees_the_cluster_kubectl_sees_node_by_node_and_pod_by_pod() {
    if !kubectl_here() {
        return;
    }
    let lab = KubeLab::start();
    let kube = lab.kubectl_json(&["get", "nodes,pods", "-A", "-o", "json"]);
    let ours: BTreeMap<String, Value> = get(&lab, "nodes")
        .into_iter()
        .map(|n| (n["name"].as_str().unwrap_or("").to_string(), n))
        .collect();
    let (nodes, pods): (Vec<Value>, Vec<Value>) =
        items(&kube).into_iter().partition(|o| o["kind"] == "Node");
    assert_eq!(nodes.len(), ours.len(), "every GPU node, and only those");
    for n in &nodes {
        let name = n["metadata"]["name"].as_str().unwrap();
        let o = &ours[name];
        let ready = n["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True");
        let cordoned = n["spec"]["unschedulable"] == true;
        let nvidia_taint = n["spec"]["taints"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|t| t["key"].as_str().unwrap().starts_with("nvidia.com/"));
        let want = if !ready {
            "down"
        } else if cordoned || nvidia_taint {
            "cordoned"
        } else {
            "up"
        };
        assert_eq!(o["state"], want, "{name}");
        assert_eq!(
            o["gpus_total"].to_string(),
            n["metadata"]["labels"]["nvidia.com/gpu.count"]
                .as_str()
                .unwrap(),
            "{name}"
        );
        // GPUs held on the node: the running GPU pods kubectl lists there.
        let held: u64 = pods
            .iter()
            .filter(|p| p["spec"]["nodeName"] == name && p["status"]["phase"] == "Running")
            .map(pod_gpus)
            .sum();
        assert_eq!(o["gpus_allocated"].as_u64(), Some(held), "{name}");
    }
    // Failure domains as Kueue's Topology names them: its levels' node
    // labels, narrowest first (the hostname level is the node itself), then
    // the zone; read back with kubectl.
    let topo = lab.kubectl_json(&["get", "topologies.kueue.x-k8s.io", "default", "-o", "json"]);
    let levels: Vec<String> = topo["spec"]["levels"]
        .as_array()
        .expect("levels")
        .iter()
        .filter_map(|l| l["nodeLabel"].as_str())
        .filter(|l| *l != "kubernetes.io/hostname")
        .map(str::to_string)
        .collect();
    assert_eq!(levels.len(), 2, "{topo}");
    for n in &nodes {
        let name = n["metadata"]["name"].as_str().unwrap();
        let labels = &n["metadata"]["labels"];
        let mut want: Vec<String> = levels
            .iter()
            .rev()
            .filter_map(|l| labels[l.as_str()].as_str().map(str::to_string))
            .collect();
        want.extend(
            labels["topology.kubernetes.io/zone"]
                .as_str()
                .map(str::to_string),
        );
        let got: Vec<String> = ours[name]["domains"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|d| d["name"].as_str().map(str::to_string))
            .collect();
        assert_eq!(got, want, "{name}");
        assert_eq!(ours[name]["domains"][0]["level"], "rack", "{name}");
    }
    // Pod by pod: each GPU pod is in exactly one job, in its namespace,
    // running on its node when kubectl says it runs there.
    let jobs = get(&lab, "jobs");
    let gpu_pods: Vec<&Value> = pods.iter().filter(|p| pod_gpus(p) > 0).collect();
    assert!(gpu_pods.len() >= 10, "the fixture has GPU pods");
    for p in &gpu_pods {
        let ns = p["metadata"]["namespace"].as_str().unwrap();
        let name = p["metadata"]["name"].as_str().unwrap();
        let owner = p["metadata"]["annotations"]["scheduling.k8s.io/group-name"]
            .as_str()
            .or_else(|| p["metadata"]["ownerReferences"][0]["name"].as_str())
            .unwrap_or(name);
        let id = format!("{ns}/{owner}");
        let j = jobs
            .iter()
            .find(|j| j["id"] == id)
            .unwrap_or_else(|| panic!("pod {ns}/{name}: no job {id}"));
        if p["status"]["phase"] == "Running" {
            assert_eq!(j["state"], "running", "{id}");
            let node = p["spec"]["nodeName"].as_str().unwrap();
            assert!(
                j["nodes"].as_array().unwrap().iter().any(|n| n == node),
                "{id} runs on {node}"
            );
        } else {
            assert_eq!(j["state"], "pending", "{id}: pod {name} is pending");
        }
    }
    // Workloads still waiting for Kueue have no pods, but are jobs.
    let wls = lab.kubectl_json(&["get", "workloads", "-A", "-o", "json"]);
    for w in items(&wls) {
        let ns = w["metadata"]["namespace"].as_str().unwrap();
        let owner = w["metadata"]["ownerReferences"][0]["name"]
            .as_str()
            .unwrap();
        let j = jobs
            .iter()
            .find(|j| j["id"] == format!("{ns}/{owner}"))
            .unwrap_or_else(|| panic!("workload {ns}/{owner} is no job"));
        assert_eq!(
            j["account"],
            w["spec"]["queueName"]
                .as_str()
                .map(|q| format!("{q}-cq"))
                .unwrap()
        );
    }
    // The scheduler's words explained, with the quota's numbers.
    let why = text(&lab.nightshift(&["why", "team-a/finetune-7b"]));
    assert!(
        why.contains("no unused nvidia.com/gpu quota in flavor h100 (8 more needed)"),
        "{why}"
    );
    assert!(
        why.contains("team team-a-cq uses 32 of its 32 GPUs"),
        "{why}"
    );
    // Its place in line, from Kueue's visibility API (kubectl reads the same).
    let pending = lab.kubectl_json(&[
        "get",
        "--raw",
        "/apis/visibility.kueue.x-k8s.io/v1beta1/clusterqueues/team-a-cq/pendingworkloads",
    ]);
    assert_eq!(
        pending["items"][0]["metadata"]["name"],
        "job-finetune-7b-9c3e0"
    );
    assert_eq!(pending["items"][0]["positionInClusterQueue"], 0);
    assert!(
        why.contains("#1 in ClusterQueue team-a-cq (first in line)"),
        "{why}"
    );
    let why = text(&lab.nightshift(&["why", "team-b/eval-harness"]));
    assert!(
        why.contains("kube-scheduler found 0 of 8 nodes usable: 5 too few free nvidia.com/gpu"),
        "{why}"
    );
    // The incident: the Xid 79 node and the gang it hit.
    let inc = text(&lab.nightshift(&["get", "incidents"]));
    assert!(
        inc.contains("XID 79") && inc.contains("team-a/llm-pretrain"),
        "{inc}"
    );
    let blast = text(&lab.nightshift(&["blast", "drain", "gpu-03"]));
    assert!(
        blast.contains("team-a/llm-pretrain") && blast.contains("32 GPUs"),
        "{blast}"
    );
    // Restore time from the checkpoint annotations.
    let restore = text(&lab.nightshift(&["restore", "team-a/llm-pretrain"]));
    assert!(
        restore.contains("1.1 TB") && restore.contains("32 GPUs on 4 node(s)"),
        "{restore}"
    );
    // --namespace narrows the jobs, not the nodes.
    let out = lab.nightshift(&["-n", "team-a", "get", "jobs", "-o", "json"]);
    let narrowed = items(&serde_json::from_slice(&out.stdout).expect("json"));
    let ids: Vec<&str> = narrowed.iter().filter_map(|j| j["id"].as_str()).collect();
    assert_eq!(ids, vec!["team-a/llm-pretrain", "team-a/finetune-7b"]);
    let out = lab.nightshift(&["-n", "team-a", "get", "nodes", "-o", "json"]);
    assert_eq!(
        items(&serde_json::from_slice(&out.stdout).expect("json")).len(),
        8
    );
}

#[test]
fn kubectl_cordons_uncordons_and_drains_through_the_lab_with_its_pdb() {
    if !kubectl_here() {
        return;
    }
    let lab = KubeLab::start();
    let out = lab.kubectl(&["cordon", "gpu-06"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(
        lab.kubectl_json(&["get", "node", "gpu-06", "-o", "json"])["spec"]["unschedulable"],
        true
    );
    assert_eq!(
        get(&lab, "nodes")
            .iter()
            .find(|n| n["name"] == "gpu-06")
            .unwrap()["state"],
        "cordoned"
    );
    let out = lab.kubectl(&["uncordon", "gpu-06"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(
        get(&lab, "nodes")
            .iter()
            .find(|n| n["name"] == "gpu-06")
            .unwrap()["state"],
        "up"
    );
    // drain: the DaemonSet pod stays, the Job's pod is evicted.
    let out = lab.kubectl(&["drain", "gpu-06", "--ignore-daemonsets", "--timeout=20s"]);
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    assert!(t.contains("evicting pod team-b/data-prep-0-q8v4m"), "{t}");
    let left = lab.kubectl_json(&[
        "get",
        "pods",
        "-A",
        "--field-selector",
        "spec.nodeName=gpu-06",
        "-o",
        "json",
    ]);
    let names: Vec<String> = items(&left)
        .iter()
        .map(|p| p["metadata"]["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(names, vec!["nvidia-dcgm-exporter-fx6z"]);
    // The PDB refuses the gang's pod: kubectl retries, then gives up.
    let out = lab.kubectl(&["drain", "gpu-02", "--ignore-daemonsets", "--timeout=6s"]);
    let t = text(&out);
    assert!(!out.status.success(), "{t}");
    assert!(
        t.contains("Cannot evict pod as it would violate the pod's disruption budget"),
        "{t}"
    );
    assert!(
        lab.kubectl(&["get", "pod", "-n", "team-a", "llm-pretrain-worker-1"])
            .status
            .success(),
        "the refused pod is still there"
    );
}

#[test]
fn nightshift_cordons_drains_and_requeues_through_the_guard_and_kubectl_sees_it() {
    if !kubectl_here() {
        return;
    }
    let lab = KubeLab::start();
    // A short PDB retry for the test; the lab has 3 of 8 nodes out of
    // service already, so the circuit breaker's share is raised.
    let cfg = lab.dir.path().join("nightshift.toml");
    std::fs::write(
        &cfg,
        "[kube]\nevict_timeout_s = 3\n[actions]\nmax_partition_share_out = 0.75\nmax_nodes_per_window = 10\n",
    )
    .unwrap();
    let cfg = cfg.to_str().unwrap();

    let out = lab.nightshift(&["--config", cfg, "cordon", "gpu-07", "--reason", "fan alarm"]);
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    assert!(t.contains(r#"PATCH /api/v1/nodes/gpu-07 {"metadata":{"annotations":{"nightshift.io/reason":"fan alarm"}},"spec":{"unschedulable":true}}"#), "{t}");
    let n = lab.kubectl_json(&["get", "node", "gpu-07", "-o", "json"]);
    assert_eq!(n["spec"]["unschedulable"], true);
    assert_eq!(
        n["metadata"]["annotations"]["nightshift.io/reason"],
        "fan alarm"
    );
    let out = lab.nightshift(&["--config", cfg, "resume", "gpu-07"]);
    assert!(out.status.success(), "{}", text(&out));
    let n = lab.kubectl_json(&["get", "node", "gpu-07", "-o", "json"]);
    assert!(n["spec"]["unschedulable"].is_null(), "{n}");

    // Drain gpu-02: cordoned, the gang's pod there refused by its PDB and
    // reported by name; the DaemonSet pod is not touched.
    let out = lab.nightshift(&[
        "--config",
        cfg,
        "drain",
        "gpu-02",
        "--reason",
        "xid storm",
        "--requeue",
        "--confirm",
        "gpu-02",
    ]);
    let t = text(&out);
    assert!(
        t.contains("POST /api/v1/namespaces/team-a/pods/llm-pretrain-worker-1/eviction"),
        "{t}"
    );
    assert!(!t.contains("nvidia-dcgm-exporter-bx2z/eviction"), "{t}");
    assert!(
        t.contains("team-a/llm-pretrain"),
        "the preview names the gang: {t}"
    );
    assert!(t.contains("WARNING: PDB llm-pretrain-pdb allows 0 disruptions: the eviction of team-a/llm-pretrain-worker-1 will be refused"), "said before: {t}");
    assert!(
        t.contains("blocked by PDB llm-pretrain-pdb: 0 disruptions allowed"),
        "{t}"
    );
    let n = lab.kubectl_json(&["get", "node", "gpu-02", "-o", "json"]);
    assert_eq!(n["spec"]["unschedulable"], true);
    assert!(
        lab.kubectl(&["get", "pod", "-n", "team-a", "llm-pretrain-worker-1"])
            .status
            .success()
    );
    assert!(
        lab.kubectl(&[
            "get",
            "pod",
            "-n",
            "gpu-operator",
            "nvidia-dcgm-exporter-bx2z"
        ])
        .status
        .success()
    );

    // Drain gpu-06: its one job pod is evicted.
    let out = lab.nightshift(&[
        "--config",
        cfg,
        "drain",
        "gpu-06",
        "--reason",
        "ecc",
        "--requeue",
        "--confirm",
        "gpu-06",
    ]);
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    assert!(
        !lab.kubectl(&["get", "pod", "-n", "team-b", "data-prep-0-q8v4m"])
            .status
            .success(),
        "{t}"
    );

    // Requeue the Kueue workload: deactivated, evicted by Kueue (the lab
    // emulates it), reactivated; its pods are gone and it queues again.
    let out = lab.nightshift(&[
        "--config",
        cfg,
        "requeue",
        "team-a/llm-pretrain",
        "--confirm",
        "team-a/llm-pretrain",
    ]);
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    assert!(t.contains(r#"PATCH /apis/kueue.x-k8s.io/v1beta1/namespaces/team-a/workloads/pytorchjob-llm-pretrain-5f2a1 {"spec":{"active":false}}"#), "{t}");
    let w = llm_pretrain_workload(&lab);
    assert_eq!(w["spec"]["active"], true, "{w}");
    assert!(evicted_inactive(&w), "{w}");
    let pods = lab.kubectl_json(&["get", "pods", "-n", "team-a", "-o", "json"]);
    assert!(items(&pods).is_empty(), "{pods}");
    let jobs = get(&lab, "jobs");
    let j = jobs
        .iter()
        .find(|j| j["id"] == "team-a/llm-pretrain")
        .unwrap();
    assert_eq!(j["state"], "requeued", "{j}");

    // A Volcano gang is restarted by evicting its pods (Volcano's job
    // controller recreates them).
    let out = lab.nightshift(&[
        "--config",
        cfg,
        "requeue",
        "rl/rl-sweep",
        "--confirm",
        "rl/rl-sweep",
    ]);
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    assert!(
        t.contains("POST /api/v1/namespaces/rl/pods/rl-sweep-worker-3/eviction"),
        "{t}"
    );
    assert!(items(&lab.kubectl_json(&["get", "pods", "-n", "rl", "-o", "json"])).is_empty());

    // A bare pod cannot be requeued: said before anything is sent.
    let out = lab.nightshift(&[
        "--config",
        cfg,
        "requeue",
        "default/notebook-alice",
        "--confirm",
        "default/notebook-alice",
    ]);
    let t = text(&out);
    assert!(t.contains("cannot be requeued, only evicted"), "{t}");
    assert!(
        lab.kubectl(&["get", "pod", "notebook-alice"])
            .status
            .success()
    );

    // Every action is in the audit log.
    let audit = std::fs::read_to_string(lab.dir.path().join("audit.jsonl")).unwrap();
    for what in ["gpu-07", "gpu-02", "gpu-06", "team-a/llm-pretrain"] {
        assert!(audit.contains(what), "audit lacks {what}");
    }
}

#[test]
fn the_watch_follows_changes_recovers_from_410_and_shows_a_dead_server_as_stale() {
    if !kubectl_here() {
        return;
    }
    use nightshift::model::Cluster;
    use nightshift::sources::{Update, kube};
    use std::sync::atomic::Ordering;
    let lab = KubeLab::start();
    let cfg = kube::KubeConfig {
        kubeconfig: Some(lab.kubeconfig()),
        interval: Duration::from_secs(3),
        evict_timeout: Duration::from_secs(3),
        ..Default::default()
    };
    let (tx, mut rx) = tokio::sync::mpsc::channel(64);
    lab.rt.spawn(kube::run(cfg, tx));
    // The next update `want` accepts, within 20 s.
    let mut next = |want: &dyn Fn(&Update) -> bool| -> Option<Update> {
        lab.rt.block_on(async {
            tokio::time::timeout(Duration::from_secs(20), async {
                while let Some(u) = rx.recv().await {
                    if want(&u) {
                        return Some(u);
                    }
                }
                None
            })
            .await
            .ok()
            .flatten()
        })
    };
    fn snapshot(u: &Update) -> Option<&Cluster> {
        match u {
            Update::Snapshot(c) => Some(c),
            _ => None,
        }
    }
    let state = |c: &Cluster, n: &str| c.node(n).map(|n| n.state.as_str().to_string());
    let is = move |n: &'static str, s: &'static str| {
        move |u: &Update| snapshot(u).is_some_and(|c| state(c, n).as_deref() == Some(s))
    };
    let first = next(&|u| snapshot(u).is_some_and(|c| c.nodes.len() == 8)).expect("first snapshot");
    let first = snapshot(&first).unwrap().clone();
    assert_eq!(first.name, "gpu-lab", "the context's cluster names it");
    assert_eq!(state(&first, "gpu-04").as_deref(), Some("up"));
    // A change made with kubectl arrives through the watch.
    assert!(lab.kubectl(&["cordon", "gpu-04"]).status.success());
    next(&is("gpu-04", "cordoned")).expect("the cordon is seen");
    // History compacted and watches cut: the resume gets 410 Gone, the
    // watcher lists again, and nothing is lost on the way.
    let lists = lab.lab.lists_served.load(Ordering::Relaxed);
    lab.switch("compact");
    lab.switch("cut-watches");
    assert!(lab.kubectl(&["uncordon", "gpu-04"]).status.success());
    let c = next(&is("gpu-04", "up")).expect("seen after 410");
    let c = snapshot(&c).unwrap();
    assert!(
        lab.lab.gone_served.load(Ordering::Relaxed) > 0,
        "a watch was answered 410 Gone"
    );
    assert!(
        lab.lab.lists_served.load(Ordering::Relaxed) > lists,
        "and listed again"
    );
    assert_eq!(c.nodes.len(), 8);
    assert_eq!(c.jobs.len(), first.jobs.len());
    assert!(lab.kubectl(&["cordon", "gpu-01"]).status.success());
    next(&is("gpu-01", "cordoned")).expect("watching again after 410");
    // The server goes away: the data is marked failing (stale), then, once
    // it answers again, fresh, and changes flow again.
    lab.switch("down?seconds=4");
    let failed =
        next(&|u| matches!(u, Update::Status { error: Some(_), .. })).expect("an error while down");
    if let Update::Status { error: Some(e), .. } = failed {
        assert!(e.to_string().contains("kubernetes"), "{e}");
    }
    next(&|u| matches!(u, Update::Status { error: None, .. })).expect("fresh again");
    assert!(lab.kubectl(&["uncordon", "gpu-01"]).status.success());
    next(&is("gpu-01", "up")).expect("changes flow after the outage");
}

#[test]
fn the_console_shows_the_kubernetes_cluster_and_cordons_through_its_guard() {
    if !kubectl_here() || !require("tmux", "apt-get install tmux") {
        return;
    }
    let lab = KubeLab::start();
    let cfg = lab.dir.path().join("nightshift.toml");
    std::fs::write(&cfg, "[actions]\nmax_partition_share_out = 0.75\n").unwrap();
    let t = common::Tmux::start(140, 40);
    t.type_line(&format!(
        "{} --source kube --kubeconfig {} --config {} --log-file {} --audit-log {}; echo EXIT=$?",
        common::bin(),
        lab.kubeconfig().display(),
        cfg.display(),
        lab.dir.path().join("tui.log").display(),
        lab.dir.path().join("audit.jsonl").display(),
    ));
    t.expect(" kube │ gpu-lab │ ");
    t.expect("XID 79");
    t.expect("team-a/llm-pretrain");
    t.command("queue");
    t.expect("team-a/finetune-7b");
    // A pending workload's screen at 80×24: the scheduler's sentence once
    // (in the why, not on the state's line too), the estimate in view.
    t.resize(80, 24);
    t.command("job team-a/finetune-7b");
    t.expect("why it waits");
    // The whole screen drawn (the estimate is its last part): a capture
    // taken mid-redraw can hold the queue's row beside the new screen.
    std::thread::sleep(std::time::Duration::from_millis(300));
    let s = t.expect("est. start");
    let why = s
        .lines()
        .find(|l| l.contains("1. "))
        .map(|l| l.trim().chars().take(30).collect::<String>())
        .unwrap_or_default();
    assert!(!why.is_empty(), "{s}");
    let tail: String = why.chars().skip(3).collect();
    assert_eq!(
        s.matches(tail.as_str()).count(),
        1,
        "said once: {tail:?}\n{s}"
    );
    assert!(s.contains("est. start"), "the estimate in view:\n{s}");
    t.escape();
    t.resize(140, 40);
    t.command("nodes");
    t.keys(&["/"]);
    t.keys(&["-l", "gpu-06"]);
    t.keys(&["Enter"]);
    t.keys(&["C"]);
    t.expect("will send: PATCH /api/v1/nodes/gpu-06");
    t.expect("press y to confirm");
    t.keys(&["y"]);
    t.keys(&["Enter"]);
    // The watch brings the change back; kubectl sees it too.
    t.expect("taken out of service via nightshift");
    let n = lab.kubectl_json(&["get", "node", "gpu-06", "-o", "json"]);
    assert_eq!(n["spec"]["unschedulable"], true);
    t.escape();
    t.keys(&["q"]);
    t.expect("EXIT=0");
}

#[test]
fn kueue_priority_hold_and_release_go_through_the_workload_and_pod_priority_is_refused() {
    if !kubectl_here() {
        return;
    }
    let lab = KubeLab::start();
    let wl = |field: &str| {
        lab.kubectl_json(&[
            "get",
            "workload",
            "-n",
            "team-a",
            "job-finetune-7b-9c3e0",
            "-o",
            "json",
        ])["spec"][field]
            .clone()
    };
    let out = lab.nightshift(&["priority", "team-a/finetune-7b", "500"]);
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    assert!(t.contains(r#"{"spec":{"priority":500}}"#), "{t}");
    assert_eq!(wl("priority"), 500);
    let out = lab.nightshift(&["hold", "team-a/finetune-7b"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(wl("active"), false);
    let jobs = get(&lab, "jobs");
    let j = jobs
        .iter()
        .find(|j| j["id"] == "team-a/finetune-7b")
        .unwrap();
    assert_eq!(
        (j["state"].as_str(), j["reason"].as_str()),
        (Some("pending"), Some("WorkloadInactive"))
    );
    let out = lab.nightshift(&["release", "team-a/finetune-7b"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(wl("active"), true);
    // A Job without a Kueue workload: its pods' priority cannot change,
    // and nothing is sent.
    let before = lab.kubectl_json(&["get", "pods", "-n", "team-b", "-o", "json"]);
    let out = lab.nightshift(&["priority", "team-b/data-prep", "5"]);
    let t = text(&out);
    assert!(!out.status.success(), "{t}");
    assert!(
        t.contains("a pod's priority is immutable") && t.contains("nothing sent"),
        "{t}"
    );
    let after = lab.kubectl_json(&["get", "pods", "-n", "team-b", "-o", "json"]);
    assert_eq!(before, after);
}

#[test]
fn without_kueue_and_volcano_crds_their_kinds_are_not_served_and_not_used() {
    if !kubectl_here() {
        return;
    }
    // The fixture without the CRDs and their objects: a plain cluster.
    let dir = tempfile::tempdir().unwrap();
    for f in [
        "10-namespaces.yaml",
        "20-nodes.yaml",
        "40-workloads.yaml",
        "41-pdb.yaml",
        "50-events.yaml",
    ] {
        std::fs::copy(common::kube::fixture_dir().join(f), dir.path().join(f)).unwrap();
    }
    let lab = KubeLab::start_in(dir.path());
    let out = lab.kubectl(&["get", "workloads", "-A"]);
    assert!(!out.status.success(), "no Workload kind without its CRD");
    assert!(
        text(&out).contains("the server doesn't have a resource type \"workloads\""),
        "{}",
        text(&out)
    );
    let jobs = get(&lab, "jobs");
    // The PyTorchJob's pods are still one gang; the workload-only job is gone.
    let j = jobs
        .iter()
        .find(|j| j["id"] == "team-a/llm-pretrain")
        .expect("gang from its pods");
    assert_eq!(j["gpus_total"], 32);
    assert!(
        j["account"] == "team-a",
        "no ClusterQueue: the namespace is the account: {j}"
    );
    assert!(!jobs.iter().any(|j| j["id"] == "team-a/finetune-7b"));
    let log = std::fs::read_to_string(lab.dir.path().join("nightshift.log")).unwrap_or_default();
    assert!(
        log.contains("kueue.x-k8s.io is not served"),
        "said once in the log: {log}"
    );
}

/// Started while the API server is down: nightshift says so, asks again,
/// and finds Kueue once the server answers (it used to decide once, at the
/// first failed discovery, that Kueue and Volcano were not installed).
#[test]
fn started_while_the_server_is_down_kueue_is_found_once_it_answers() {
    if !kubectl_here() {
        return;
    }
    use nightshift::sources::{Update, kube};
    let lab = KubeLab::start();
    lab.switch("down?seconds=4");
    let cfg = kube::KubeConfig {
        kubeconfig: Some(lab.kubeconfig()),
        interval: Duration::from_secs(3),
        ..Default::default()
    };
    let (tx, mut rx) = tokio::sync::mpsc::channel(64);
    lab.rt.spawn(kube::run(cfg, tx));
    let updates: Vec<Update> = lab.rt.block_on(async {
        let mut seen = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(30), async {
            while let Some(u) = rx.recv().await {
                let done = matches!(&u, Update::Snapshot(_));
                seen.push(u);
                if done {
                    break;
                }
            }
        })
        .await;
        seen
    });
    assert!(
        updates
            .iter()
            .any(|u| matches!(u, Update::Status { error: Some(_), .. })),
        "said that the server is down"
    );
    let Some(Update::Snapshot(c)) = updates.last() else {
        panic!("no snapshot after the server came back: {updates:?}");
    };
    let accounts: Vec<&str> = c.quotas.iter().map(|q| q.account.as_str()).collect();
    assert!(
        accounts.contains(&"team-a-cq") && accounts.contains(&"team-b-cq"),
        "Kueue's ClusterQueues are read: {accounts:?}"
    );
}

/// A config for the lab's actions: `extra`, then the breaker opened up
/// (the lab has 3 of 8 nodes out of service already). Its path.
fn lab_config(lab: &KubeLab, extra: &str) -> String {
    let path = lab.dir.path().join("nightshift.toml");
    let actions = if extra.contains("[actions]") {
        ""
    } else {
        "[actions]\n"
    };
    std::fs::write(
        &path,
        format!("{extra}{actions}max_partition_share_out = 0.75\nmax_nodes_per_window = 10\n"),
    )
    .expect("config");
    path.to_str().expect("utf-8 path").to_string()
}

/// Someone else cordoned gpu-04 with their reason; a drain through
/// nightshift evicts its pods but keeps their reason, and offers no undo
/// (a resume would undo their cordon, not anything nightshift did).
#[test]
fn a_drain_of_a_node_someone_cordoned_keeps_their_reason_and_offers_no_undo() {
    if !kubectl_here() {
        return;
    }
    let lab = KubeLab::start();
    let cfg = lab_config(&lab, "[kube]\nevict_timeout_s = 3\n");
    let cfg = cfg.as_str();
    assert!(lab.kubectl(&["cordon", "gpu-04"]).status.success());
    let out = lab.kubectl(&[
        "annotate",
        "node",
        "gpu-04",
        "nightshift.io/reason=theirs: PSU",
    ]);
    assert!(out.status.success(), "{}", text(&out));
    let out = lab.nightshift(&[
        "--config",
        cfg,
        "drain",
        "gpu-04",
        "--reason",
        "mine",
        "--requeue",
        "--confirm",
        "gpu-04",
    ]);
    let t = text(&out);
    assert!(t.contains("already cordoned"), "{t}");
    assert!(
        !t.contains("undo:"),
        "no undo of someone else's cordon: {t}"
    );
    let n = lab.kubectl_json(&["get", "node", "gpu-04", "-o", "json"]);
    assert_eq!(n["spec"]["unschedulable"], true);
    assert_eq!(
        n["metadata"]["annotations"]["nightshift.io/reason"],
        "theirs: PSU"
    );
}

/// `[actions] timeout_s` bounds an action on Kubernetes too: a drain whose
/// eviction a PDB refuses stops retrying at the action's timeout, not at
/// the evictions' own 20 s (the command line used a fixed 60 s).
#[test]
fn the_action_timeout_bounds_a_kubernetes_drain() {
    if !kubectl_here() {
        return;
    }
    let lab = KubeLab::start();
    let cfg = lab_config(
        &lab,
        "[kube]\nevict_timeout_s = 20\n[actions]\ntimeout_s = 2\n",
    );
    let t = std::time::Instant::now();
    let out = lab.nightshift(&[
        "--config",
        &cfg,
        "drain",
        "gpu-02",
        "--reason",
        "xid storm",
        "--confirm",
        "gpu-02",
    ]);
    let took = t.elapsed();
    assert!(
        took < Duration::from_secs(12),
        "took {took:?}: {}",
        text(&out)
    );
    assert!(
        !out.status.success(),
        "the eviction was not done: {}",
        text(&out)
    );
}

/// gpu-06 reports a GPU fault the way the GPU operator and
/// node-problem-detector do (a `GpuXidError` condition naming GPU 5 and
/// Xid 79, the `nvidia.com/gpu-xid=79:NoSchedule` taint) and someone
/// cordoned it. It is critical everywhere; a resume asks for the node's
/// name, says the taint keeps it out, and does not report a success the
/// cluster does not show.
#[test]
fn a_gpu_fault_condition_and_taint_keep_the_node_critical_and_a_resume_honest() {
    if !kubectl_here() {
        return;
    }
    let lab = KubeLab::start();
    let cfg = lab_config(&lab, "");
    let cfg = cfg.as_str();
    let patch = r#"{"spec":{"unschedulable":true,"taints":[
        {"key":"nvidia.com/gpu-xid","value":"79","effect":"NoSchedule"},
        {"key":"node.kubernetes.io/unschedulable","effect":"NoSchedule"}]}}"#;
    let out = lab.kubectl(&["patch", "node", "gpu-06", "--type=merge", "-p", patch]);
    assert!(out.status.success(), "{}", text(&out));
    let status = r#"{"status":{"conditions":[
        {"type":"Ready","status":"True","reason":"KubeletReady","message":"kubelet is posting ready status","lastTransitionTime":"2026-11-20T10:00:00Z"},
        {"type":"GpuXidError","status":"True","reason":"XidCritical","message":"GPU 5: Xid 79 (GPU has fallen off the bus)","lastTransitionTime":"2026-11-27T02:47:00Z"}]}}"#;
    let out = lab.kubectl(&[
        "patch",
        "node",
        "gpu-06",
        "--subresource=status",
        "--type=merge",
        "-p",
        status,
    ]);
    assert!(out.status.success(), "{}", text(&out));

    let gpus = get(&lab, "gpus");
    let g5 = gpus
        .iter()
        .find(|g| g["node"] == "gpu-06" && g["index"] == 5)
        .expect("gpu-06 GPU 5");
    assert_eq!(g5["health"], "critical", "{g5}");
    assert_eq!(g5["last_xid"]["code"], 79, "{g5}");
    let inc = text(&lab.nightshift(&["get", "incidents"]));
    // One failure, one incident: the condition and the taint that says it
    // again are its evidence.
    let rows: Vec<&str> = inc.lines().filter(|l| l.contains("gpu-06")).collect();
    assert_eq!(rows.len(), 1, "{inc}");
    let line = rows[0];
    assert!(
        line.contains("XID 79") && !line.contains("remedied"),
        "{line}"
    );
    let opts = text(&lab.nightshift(&["options", "gpu-06"]));
    assert!(opts.contains("drain"), "{opts}");
    // One situation (issue 39): a recording of this moment, and every
    // command's answer for it is the one analysis's.
    let file = lab.dir.path().join("kube.nsrec");
    let out = lab.nightshift(&["record", file.to_str().expect("path"), "--for", "3s"]);
    assert!(out.status.success(), "{}", text(&out));
    let compared = common::situation::one_answer_at_the_end(lab.dir.path(), &file, 3, &|a| {
        let out = lab.nightshift(a);
        (out.status.success(), text(&out))
    });
    assert!(compared >= 4, "only {compared} answers compared");
    // `nightshift doctor` (issue 41): where it connects, as whom, what it
    // discovered; the GPU-fault node does not make the source fail.
    let out = lab.nightshift(&["doctor"]);
    let said = text(&out);
    let k = said
        .lines()
        .find(|l| l.starts_with("ok    kubernetes"))
        .unwrap_or_else(|| panic!("{said}"));
    assert!(k.contains("context ") && k.contains(" as user "), "{k}");
    assert!(
        k.contains("(Kubernetes v1.32.0-nightshift-kube-lab)"),
        "{k}"
    );
    assert!(k.contains("Workload kueue.x-k8s.io/"), "{k}");
    assert!(
        said.lines()
            .any(|l| l.starts_with("ok    scheduler") && l.contains("kube answered")),
        "{said}"
    );
    assert!(
        said.lines()
            .any(|l| l.starts_with("ok    kubernetes rights") && l.contains("are allowed")),
        "{said}"
    );
    // A context without the rights to act (kube-lab's `lab-viewer`, the
    // `view` role's verbs). kubectl, the real client, finds the stand-in's
    // answers to be the API server's: can-i says no, a cordon is forbidden.
    let viewer = "gpu-lab-viewer";
    let can = lab.kubectl(&["--context", viewer, "auth", "can-i", "patch", "nodes"]);
    assert_eq!(
        String::from_utf8_lossy(&can.stdout).trim(),
        "no",
        "{}",
        text(&can)
    );
    let can = lab.kubectl(&["--context", viewer, "auth", "can-i", "list", "pods", "-A"]);
    assert_eq!(
        String::from_utf8_lossy(&can.stdout).trim(),
        "yes",
        "{}",
        text(&can)
    );
    // (kubectl 1.32's cordon prints the refusal and still exits 0.)
    let refused = lab.kubectl(&["--context", viewer, "cordon", "gpu-01"]);
    assert!(
        text(&refused).contains("cannot patch resource \"nodes\""),
        "{}",
        text(&refused)
    );
    assert_ne!(
        lab.kubectl_json(&["get", "node", "gpu-01", "-o", "json"])["spec"]["unschedulable"],
        true
    );
    let out = lab.nightshift(&["--context", viewer, "doctor"]);
    let said = text(&out);
    assert!(!out.status.success(), "{said}");
    let rights = said
        .lines()
        .find(|l| l.starts_with("FAIL  kubernetes rights"))
        .unwrap_or_else(|| panic!("{said}"));
    assert!(
        rights.contains("cannot act: may not patch nodes (cordon")
            && rights.contains("create pods/eviction (a drain's evictions)"),
        "{rights}"
    );
    assert!(said.contains("as user lab-viewer"), "{said}");
    // Read-only, the same user is all nightshift needs.
    let out = lab.nightshift(&["--context", viewer, "--read-only", "doctor"]);
    let said = text(&out);
    assert!(
        said.lines()
            .any(|l| l.starts_with("ok    kubernetes rights")
                && l.contains("read-only: actions' verbs not asked")),
        "{said}"
    );

    // A plain yes does not put a broken GPU back in service.
    let out = lab.nightshift(&["--config", cfg, "resume", "gpu-06", "--confirm", "y"]);
    assert!(!out.status.success(), "{}", text(&out));
    assert_eq!(
        lab.kubectl_json(&["get", "node", "gpu-06", "-o", "json"])["spec"]["unschedulable"],
        true
    );
    let out = lab.nightshift(&["--config", cfg, "resume", "gpu-06", "--confirm", "gpu-06"]);
    let t = text(&out);
    assert!(t.contains("health is unresolved"), "{t}");
    assert!(
        t.contains(
            "stays out of service after the uncordon: taint nvidia.com/gpu-xid=79:NoSchedule"
        ),
        "{t}"
    );
    assert!(
        t.contains("uncordoned, still out of service: taint nvidia.com/gpu-xid=79:NoSchedule"),
        "{t}"
    );
    assert!(!t.contains("verified: node gpu-06: schedulable"), "{t}");
    assert!(!out.status.success(), "not verified is not a success: {t}");
}

/// Lists come in pages, as kube-apiserver serves them: 1,234 GPU nodes
/// read by nightshift (pages of 500, each slimmed before the next) and by
/// kubectl (`--chunk-size 100`) are every node, once.
#[test]
fn a_big_cluster_is_listed_in_pages_by_nightshift_and_kubectl() {
    if !kubectl_here() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let nodes: Vec<Value> = (0..1234)
        .map(|i| {
            serde_json::json!({"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": format!("gpu-{i:04}"), "labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
                    "managedFields": [{"manager": "kubelet", "fieldsV1": {"f:status": {}}}]},
                "status": {"allocatable": {"nvidia.com/gpu": "8"}, "capacity": {"nvidia.com/gpu": "8"},
                    "images": [{"names": ["nvcr.io/nvidia/pytorch:24.10-py3"], "sizeBytes": 9_000_000_000u64}],
                    "conditions": [{"type": "Ready", "status": "True"}]}})
        })
        .collect();
    std::fs::write(
        dir.path().join("nodes.json"),
        serde_json::json!({"apiVersion": "v1", "kind": "List", "items": nodes}).to_string(),
    )
    .expect("manifest");
    let lab = KubeLab::start_in(dir.path());
    let served = || {
        lab.lab
            .lists_served
            .load(std::sync::atomic::Ordering::Relaxed)
    };
    let before = served();
    let ours = get(&lab, "nodes");
    assert_eq!(ours.len(), 1234);
    let names: std::collections::BTreeSet<&str> =
        ours.iter().filter_map(|n| n["name"].as_str()).collect();
    assert_eq!(names.len(), 1234, "each node once");
    assert!(
        served() - before >= 3,
        "nodes in pages of 500: {}",
        served() - before
    );
    let theirs = lab.kubectl_json(&["get", "nodes", "--chunk-size", "100", "-o", "json"]);
    let theirs: std::collections::BTreeSet<String> = items(&theirs)
        .iter()
        .filter_map(|n| n["metadata"]["name"].as_str().map(str::to_string))
        .collect();
    assert_eq!(theirs.len(), 1234);
    assert!(names.iter().all(|n| theirs.contains(*n)));
}

/// Plays the Job controller and the kubelet for the check's Job, as
/// kube-lab runs neither: waits for nightshift's Job (checking it is
/// pinned to `node`, tolerates every taint and asks for the node's 8
/// GPUs), then creates its pod, ended with `exit` and the DCGM stand-in's
/// output as its termination message (`FallbackToLogsOnError` puts the
/// log's tail there), and marks the Job succeeded or failed, all with
/// kubectl.
fn run_check_job(lab: &KubeLab, node: &str, verdict: &str) {
    let selector = format!("nightshift.io/validate={node}");
    let job = common::wait_for(Duration::from_secs(30), || {
        let v = lab.kubectl_json(&[
            "get", "jobs", "-n", "default", "-l", &selector, "-o", "json",
        ]);
        items(&v)
            .into_iter()
            .find(|j| j["status"]["succeeded"].is_null() && j["status"]["failed"].is_null())
    })
    .unwrap_or_else(|| panic!("no check Job for {node}"));
    let name = job["metadata"]["name"].as_str().expect("name").to_string();
    assert!(
        name.starts_with(&format!("nightshift-validate-{node}-")),
        "{name}"
    );
    let pod_spec = &job["spec"]["template"]["spec"];
    assert_eq!(pod_spec["nodeName"], node, "{job:#}");
    assert_eq!(pod_spec["tolerations"][0]["operator"], "Exists", "{job:#}");
    let c = &pod_spec["containers"][0];
    assert_eq!(c["resources"]["limits"]["nvidia.com/gpu"], "8", "{job:#}");
    assert_eq!(c["terminationMessagePolicy"], "FallbackToLogsOnError");
    let cmd = c["command"][2].as_str().unwrap_or_default().to_string();
    assert!(cmd.ends_with(&format!("dcgmi.sh {verdict} 2")), "{cmd}");
    let script = common::dcgmi_stand_in();
    let out = std::process::Command::new("sh")
        .arg(&script)
        .args([verdict, "2"])
        .output()
        .expect("the DCGM stand-in");
    let (exit, phase, done) = if out.status.success() {
        (0, "Succeeded", r#"{"status":{"succeeded":1}}"#)
    } else {
        (1, "Failed", r#"{"status":{"failed":1}}"#)
    };
    let pod = serde_json::json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": format!("{name}-x1"), "namespace": "default",
            "labels": {"job-name": name}},
        "spec": {"nodeName": node, "restartPolicy": "Never",
            "containers": [{"name": "check", "image": "dcgm"}]}});
    let file = lab.dir.path().join(format!("{name}-pod.json"));
    std::fs::write(&file, pod.to_string()).expect("pod");
    // The lab serves no OpenAPI document for kubectl to validate against.
    let made = lab.kubectl(&[
        "create",
        "--validate=false",
        "-f",
        file.to_str().expect("path"),
    ]);
    assert!(made.status.success(), "{}", text(&made));
    // As kube-apiserver answers a second create of the same name.
    let again = lab.kubectl(&[
        "create",
        "--validate=false",
        "-f",
        file.to_str().expect("path"),
    ]);
    assert!(
        !again.status.success() && text(&again).contains("AlreadyExists"),
        "{}",
        text(&again)
    );
    // The pod's log, as the kubelet would serve it (issue 43): a failing
    // check's output at the end of 2,000,000 lines (read as a bounded
    // tail, not its first MiB); a passing check's log never ends (read up
    // to a bound, never whole).
    let log = if out.status.success() {
        serde_json::json!({"endless": true})
    } else {
        serde_json::json!({"lines": "step ok: burn-in iteration\n", "times": 2_000_000,
            "last": String::from_utf8_lossy(&out.stdout)})
    };
    lab.set_log(&format!("default/{name}-x1"), &log);
    let status = serde_json::json!({"status": {"phase": phase, "containerStatuses": [{
        "name": "check", "ready": false, "restartCount": 0,
        "state": {"terminated": {"exitCode": exit,
            "message": String::from_utf8_lossy(&out.stdout)}}}]}});
    let patched = lab.kubectl(&[
        "patch",
        "pod",
        &format!("{name}-x1"),
        "-n",
        "default",
        "--subresource=status",
        "--type=merge",
        "-p",
        &status.to_string(),
    ]);
    assert!(patched.status.success(), "{}", text(&patched));
    let patched = lab.kubectl(&[
        "patch",
        "job",
        &name,
        "-n",
        "default",
        "--subresource=status",
        "--type=merge",
        "-p",
        done,
    ]);
    assert!(patched.status.success(), "{}", text(&patched));
}

/// Back to service through a check, on Kubernetes (issue 29): a cordoned
/// node's check runs as a Job pinned to it (kube-lab stands in for the
/// Job controller and the kubelet, see `run_check_job`); on a pass the
/// node is uncordoned, on a failure it stays cordoned with the failing
/// test as its reason — both verified with kubectl.
#[test]
fn a_cordoned_node_is_validated_by_a_pinned_job_then_uncordoned_or_kept_out() {
    if !kubectl_here() {
        return;
    }
    let lab = KubeLab::start();
    let script = common::dcgmi_stand_in();
    // gpu-07 fails its check, then passes the next (after the repair): a
    // run of its own, not refused because the failed run's Job is kept.
    let runs = [("gpu-05", "pass"), ("gpu-07", "fail"), ("gpu-07", "pass")];
    for (node, verdict) in runs {
        assert!(lab.kubectl(&["cordon", node]).status.success());
        // Cordoned with healthy GPUs: the options offer the check.
        let opts = text(&lab.nightshift(&["options", node]));
        assert!(opts.contains("validate (DCGM level"), "{opts}");
        let cfg = lab_config(
            &lab,
            &format!(
                "[validate]\ncommand = \"sh {} {verdict} {{level}}\"\ntimeout = \"1m\"\n",
                script.display()
            ),
        );
        if node == "gpu-07" && verdict == "fail" {
            // Its pods still run (a 4-GPU pod among them): the check needs
            // the whole node, so it is refused at preview with which jobs
            // hold it, and no Job is made (issue 37); drained, it is checked.
            let out = lab.nightshift(&["--config", &cfg, "validate", node, "--level", "2"]);
            let t = text(&out);
            assert!(!out.status.success(), "{t}");
            assert!(
                t.contains("still runs") && t.contains("drain it first"),
                "{t}"
            );
            let jobs = lab.kubectl_json(&["get", "jobs", "-n", "default", "-o", "json"]);
            assert!(
                items(&jobs)
                    .iter()
                    .all(|j| j["spec"]["template"]["spec"]["nodeName"] != node),
                "{jobs:#}"
            );
            let drained = lab.nightshift(&[
                "--config",
                &cfg,
                "drain",
                node,
                "--reason",
                "xid 79",
                "--requeue",
                "--confirm",
                node,
            ]);
            assert!(drained.status.success(), "{}", text(&drained));
        }
        let out = std::thread::scope(|s| {
            let run =
                s.spawn(|| lab.nightshift(&["--config", &cfg, "validate", node, "--level", "2"]));
            run_check_job(&lab, node, verdict);
            run.join().expect("nightshift")
        });
        let t = text(&out);
        let n = lab.kubectl_json(&["get", "node", node, "-o", "json"]);
        if verdict == "pass" {
            assert!(out.status.success(), "{t}");
            assert!(t.contains(&format!("uncordon {node} ✓")), "{t}");
            assert_ne!(n["spec"]["unschedulable"], true, "{n:#}");
        } else {
            assert!(!out.status.success(), "{t}");
            assert!(
                t.contains("GPU Memory: GPU 3: Pending page retirements"),
                "{t}"
            );
            assert_eq!(n["spec"]["unschedulable"], true, "{n:#}");
            let reason = n["metadata"]["annotations"]["nightshift.io/reason"]
                .as_str()
                .unwrap_or_default();
            assert!(
                reason.starts_with("nightshift validation failed: GPU Memory: GPU 3:"),
                "{reason}"
            );
        }
    }
}

/// "Requeue after its checkpoint" on Kubernetes (issue 29): armed with
/// nothing sent (the Kueue Workload stays active, its pods run), then
/// `nightshift follow` sends the requeue once the gang's pods say a new
/// checkpoint was written (their `nightshift.io/checkpoint-last`, moved
/// with kubectl as the training job would) — verified with kubectl.
#[test]
fn a_requeue_armed_after_the_checkpoint_is_sent_by_follow_when_the_checkpoint_moves() {
    if !kubectl_here() {
        return;
    }
    let lab = KubeLab::start();
    let cfg = lab_config(&lab, "");
    let job = "team-a/llm-pretrain";
    let out = lab.nightshift(&[
        "--config",
        &cfg,
        "requeue",
        job,
        "--after-checkpoint",
        "--confirm",
        job,
    ]);
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    assert!(
        t.lines().any(|l| l.starts_with("armed ")
            && l.contains(&format!(
                ": requeue {job} after the checkpoint of job {job}"
            ))),
        "{t}"
    );
    let pods = || items(&lab.kubectl_json(&["get", "pods", "-n", "team-a", "-o", "json"])).len();
    let before = pods();
    assert!(before >= 4, "the gang runs: {before} pods");
    let out = std::thread::scope(|s| {
        let run = s.spawn(|| {
            lab.nightshift(&[
                "--config",
                &cfg,
                "follow",
                "--interval",
                "1s",
                "--for",
                "60s",
            ])
        });
        std::thread::sleep(Duration::from_secs(3));
        assert_eq!(pods(), before, "nothing sent before the checkpoint");
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("clock")
            .as_secs();
        // The gang's last pod first: the job's checkpoint is read from its
        // first pod, so every pod has moved by the time it has (follow
        // polls every second; no race with the annotations).
        for i in (0..4).rev() {
            let a = lab.kubectl(&[
                "annotate",
                "pod",
                "-n",
                "team-a",
                &format!("llm-pretrain-worker-{i}"),
                "--overwrite",
                &format!("nightshift.io/checkpoint-last={now}"),
            ]);
            assert!(a.status.success(), "{}", text(&a));
        }
        run.join().expect("follow")
    });
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    assert!(
        t.contains(&format!("waiting for job {job}'s checkpoint")),
        "{t}"
    );
    assert!(
        t.contains(&format!("fired: job {job} checkpointed at")),
        "{t}"
    );
    let w = llm_pretrain_workload(&lab);
    assert!(evicted_inactive(&w), "{w}");
    assert_eq!(pods(), before - 4, "the gang's pods are gone");
}

/// team-a/llm-pretrain's Kueue Workload, as kubectl reads it.
fn llm_pretrain_workload(lab: &KubeLab) -> Value {
    lab.kubectl_json(&[
        "get",
        "workload",
        "-n",
        "team-a",
        "pytorchjob-llm-pretrain-5f2a1",
        "-o",
        "json",
    ])
}

/// Whether Kueue evicted the Workload for being deactivated (a requeue).
fn evicted_inactive(w: &Value) -> bool {
    w["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Evicted" && c["reason"] == "InactiveWorkload")
}

/// A soft preemption on Kubernetes (issue 37): there is no signal to ask a
/// job to checkpoint, so `preempt JOB --grace 1m` would end the pods at
/// once while its preview promised a checkpoint first. It is refused with
/// the reason (exit non-zero), nothing is sent — the Workload stays active
/// and its pods run, checked with kubectl — and the options do not offer it
/// (they offer "preempt after its next checkpoint").
#[test]
fn a_soft_preemption_is_refused_on_kubernetes_and_nothing_is_sent() {
    if !kubectl_here() {
        return;
    }
    let lab = KubeLab::start();
    let cfg = lab_config(&lab, "");
    let job = "team-a/llm-pretrain";
    let pods = || items(&lab.kubectl_json(&["get", "pods", "-n", "team-a", "-o", "json"])).len();
    let before = pods();
    let out = lab.nightshift(&[
        "--config",
        &cfg,
        "preempt",
        job,
        "--grace",
        "1m",
        "--confirm",
        job,
    ]);
    let t = text(&out);
    assert!(!out.status.success(), "{t}");
    assert!(t.contains("no signal to ask"), "{t}");
    assert_eq!(pods(), before, "nothing sent");
    let w = llm_pretrain_workload(&lab);
    assert!(!evicted_inactive(&w), "{w}");
    assert_ne!(w["spec"]["active"], false, "{w}");
    let opts = text(&lab.nightshift(&["--config", &cfg, "options", job]));
    assert!(!opts.contains("signal"), "{opts}");
    assert!(opts.contains("preempt after its next checkpoint"), "{opts}");
}

/// The calls sent are the calls previewed, on Kubernetes (issue 37): for
/// every action nightshift takes there, the preview's `will send:` lines
/// against the writes kube-lab received from nightshift — in order,
/// nothing more, nothing less. The test's own kubectl writes (standing in
/// for the Job controller during a validation) are told apart by their
/// User-Agent.
#[test]
fn every_kubernetes_action_sends_exactly_the_calls_its_preview_listed() {
    use common::sent::{assert_sent_as_previewed, of_kube, previewed};
    if !kubectl_here() {
        return;
    }
    let lab = KubeLab::start();
    let script = common::dcgmi_stand_in();
    let cfg = lab_config(
        &lab,
        &format!(
            "[kube]\nevict_timeout_s = 3\n[validate]\ncommand = \"sh {} pass {{level}}\"\ntimeout = \"1m\"\n",
            script.display()
        ),
    );
    let ours = |from: usize| {
        let all = lab.lab.writes_so_far();
        let mine: Vec<kubelab::Write> = all[from..]
            .iter()
            .filter(|w| !w.agent.starts_with("kubectl"))
            .cloned()
            .collect();
        of_kube(&mine)
    };
    let cases: &[&[&str]] = &[
        &["cordon", "gpu-07", "--reason", "fan alarm"],
        &["reason", "gpu-07", "fan replaced, burn-in"],
        &["resume", "gpu-07"],
        &[
            "drain",
            "gpu-06",
            "--reason",
            "ecc",
            "--requeue",
            "--confirm",
            "gpu-06",
        ],
        &[
            "requeue",
            "team-a/llm-pretrain",
            "--confirm",
            "team-a/llm-pretrain",
        ],
        &["preempt", "rl/rl-sweep", "--confirm", "rl/rl-sweep"],
        &["priority", "team-a/finetune-7b", "500"],
        &["hold", "team-a/finetune-7b"],
        &["release", "team-a/finetune-7b"],
    ];
    for args in cases {
        let from = lab.lab.writes_so_far().len();
        let mut all = vec!["--config", cfg.as_str()];
        all.extend_from_slice(args);
        let out = lab.nightshift(&all);
        let t = text(&out);
        assert!(out.status.success(), "{args:?}: {t}");
        assert_sent_as_previewed(&args.join(" "), &previewed(&t), &ours(from));
    }
    // A validation: the check Job, then the uncordon its pass sends.
    let from = lab.lab.writes_so_far().len();
    let out = std::thread::scope(|s| {
        let run =
            s.spawn(|| lab.nightshift(&["--config", &cfg, "validate", "gpu-06", "--level", "2"]));
        run_check_job(&lab, "gpu-06", "pass");
        run.join().expect("nightshift")
    });
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    assert_sent_as_previewed("validate gpu-06", &previewed(&t), &ours(from));
}

/// Kueue up to 0.13 serves Topology at v1alpha1 only, beside v1beta1's
/// workloads (issue 38: discovery read only the preferred version and said
/// "served without topologies: not read"). The lab serves that shape; the
/// failure domains come from the v1alpha1 Topology as they did from the
/// v1beta1 one, checked against kubectl.
#[test]
fn a_topology_served_only_at_v1alpha1_is_read() {
    if !kubectl_here() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    for f in std::fs::read_dir(common::kube::fixture_dir()).expect("fixtures") {
        let f = f.expect("entry").path();
        let text = std::fs::read_to_string(&f).expect("read");
        let text = if f.ends_with("00-kueue-crds.yaml") {
            let (before, after) = text
                .split_once("  name: topologies.kueue.x-k8s.io")
                .expect("the Topology CRD");
            format!(
                "{before}  name: topologies.kueue.x-k8s.io{}",
                after.replacen("  - name: v1beta1", "  - name: v1alpha1", 1)
            )
        } else if f.ends_with("30-kueue.yaml") {
            text.replacen(
                "apiVersion: kueue.x-k8s.io/v1beta1\nkind: Topology",
                "apiVersion: kueue.x-k8s.io/v1alpha1\nkind: Topology",
                1,
            )
        } else {
            text
        };
        std::fs::write(dir.path().join(f.file_name().expect("name")), text).expect("write");
    }
    let lab = KubeLab::start_in(dir.path());
    let topo = lab.kubectl_json(&[
        "get",
        "topologies.v1alpha1.kueue.x-k8s.io",
        "default",
        "-o",
        "json",
    ]);
    assert_eq!(topo["apiVersion"], "kueue.x-k8s.io/v1alpha1", "{topo}");
    let nodes = get(&lab, "nodes");
    let racks: Vec<&Value> = nodes
        .iter()
        .filter(|n| n["domains"][0]["level"] == "rack")
        .collect();
    let domains: Vec<String> = nodes
        .iter()
        .map(|n| format!("{}: {}", n["name"], n["domains"]))
        .collect();
    assert_eq!(racks.len(), nodes.len(), "{domains:#?}");
    let log = std::fs::read_to_string(lab.dir.path().join("nightshift.log")).unwrap_or_default();
    assert!(!log.contains("served without topologies"), "{log}");
}

// The "sent = previewed" checker itself (tests/common/sent.rs), once:
// it must fail where a backend sends more than its preview said.
#[test]
fn the_sent_checker_takes_placeholders_quotes_and_alternatives() {
    use common::sent::{Sent, assert_sent_as_previewed, call_of};
    let p = vec![
        r#"POST /apis/batch/v1/namespaces/ns/jobs {"metadata":{"name":"check-n1-<run>"}}"#
            .to_string(),
        "wait up to 5m for it".into(),
        r#"on a pass: PATCH /api/v1/nodes/n1 {"spec":{"unschedulable":null}}"#.into(),
        r#"on a failure: PATCH /api/v1/nodes/n1 {"spec":{}}"#.into(),
        "scontrol update 'Reason=it'\\''s out'".into(),
    ];
    let sent = vec![
        call_of(
            r#"POST /apis/batch/v1/namespaces/ns/jobs {"metadata": {"name": "check-n1-k2x9"}}"#,
        )
        .unwrap(),
        call_of(r#"PATCH /api/v1/nodes/n1 {"spec":{}}"#).unwrap(),
        Sent::Command(vec![
            "scontrol".into(),
            "update".into(),
            "Reason=it's out".into(),
        ]),
    ];
    assert_sent_as_previewed("t", &p, &sent);
}

#[test]
#[should_panic(expected = "sent is not what the preview said")]
fn the_sent_checker_fails_on_one_call_more_than_previewed() {
    use common::sent::{assert_sent_as_previewed, call_of};
    let p = vec!["PATCH /w {\"spec\":{\"active\":false}}".to_string()];
    let sent = vec![
        call_of("PATCH /w {\"spec\":{\"active\":false}}").unwrap(),
        call_of("PATCH /w {\"spec\":{\"active\":true}}").unwrap(),
    ];
    assert_sent_as_previewed("t", &p, &sent);
}

/// The circuit breaker counts nodes someone else took out in its window
/// (issue 37): `kubectl cordon` sets no time, so the kubelet's
/// `NodeNotSchedulable` event says when (kube-lab has no kubelet: the test
/// creates the event the kubelet would, with kubectl). Two nodes cordoned
/// a minute ago by hand, with a limit of two per window, refuse a drain of
/// a third, naming them; nothing is sent.
#[test]
fn the_breaker_counts_nodes_cordoned_by_hand_from_the_kubelets_events() {
    if !kubectl_here() {
        return;
    }
    let lab = KubeLab::start();
    let path = lab.dir.path().join("breaker.toml");
    std::fs::write(
        &path,
        "[actions]\nmax_partition_share_out = 0.9\nmax_nodes_per_window = 2\n",
    )
    .expect("config");
    let cfg = path.to_str().expect("utf-8 path");
    let date = std::process::Command::new("date")
        .args(["-u", "-d", "1 minute ago", "+%Y-%m-%dT%H:%M:%SZ"])
        .output()
        .expect("date");
    let minute_ago = String::from_utf8_lossy(&date.stdout).trim().to_string();
    for node in ["gpu-06", "gpu-07"] {
        assert!(lab.kubectl(&["cordon", node]).status.success());
        let event = serde_json::json!({
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": format!("{node}.cordoned"), "namespace": "default"},
            "involvedObject": {"kind": "Node", "name": node, "uid": node},
            "reason": "NodeNotSchedulable",
            "message": format!("Node {node} status is now: NodeNotSchedulable"),
            "source": {"component": "kubelet", "host": node},
            "type": "Normal",
            "firstTimestamp": minute_ago,
            "lastTimestamp": minute_ago,
            "count": 1
        });
        let file = lab.dir.path().join(format!("{node}-event.json"));
        std::fs::write(&file, event.to_string()).expect("event");
        let out = lab.kubectl(&[
            "create",
            "--validate=false",
            "-f",
            file.to_str().expect("utf-8"),
        ]);
        assert!(out.status.success(), "{}", text(&out));
    }
    let out = lab.nightshift(&[
        "--config",
        cfg,
        "drain",
        "gpu-02",
        "--reason",
        "mine",
        "--requeue",
        "--confirm",
        "gpu-02",
    ]);
    let t = text(&out);
    assert!(!out.status.success(), "{t}");
    assert!(
        t.contains("2 node(s) already taken out in the last 10 min")
            && t.contains("gpu-06 at")
            && t.contains("gpu-07 at"),
        "{t}"
    );
    let n = lab.kubectl_json(&["get", "node", "gpu-02", "-o", "json"]);
    assert_ne!(n["spec"]["unschedulable"], true, "nothing was sent");
}

/// Issue 58 on Kubernetes, checked with kubectl: what the options
/// recommend, the guard accepts.
/// - A plain Job's pods (no Kueue workload, no Volcano group) cannot be
///   requeued, and nightshift's preempt is a requeue: "preempt now"
///   ("will send … through its Kueue workload") was recommended and then
///   refused. Every preemption is unavailable with the guard's reason,
///   doing nothing is recommended, and the guard's dry run says the same.
/// - A node cordoned by hand (`kubectl cordon`) that still runs a pod: its
///   check is refused (it needs the whole node), so the recommendation is
///   to validate once it is empty, with nothing sent now.
#[test]
fn recommendations_on_kubernetes_are_ones_the_guard_accepts() {
    if !kubectl_here() {
        return;
    }
    let lab = KubeLab::start();
    let jobs = get(&lab, "jobs");
    let plain = jobs
        .iter()
        .find(|j| j["name"] == "data-prep")
        .unwrap_or_else(|| panic!("no data-prep job: {jobs:#?}"));
    let id = plain["id"].as_str().expect("id").to_string();
    let out = lab.nightshift(&["options", &id, "-o", "json"]);
    assert!(out.status.success(), "{}", text(&out));
    let o: Value = serde_json::from_slice(&out.stdout).expect("json");
    let options = o["options"].as_array().expect("options");
    let picked: Vec<&Value> = options
        .iter()
        .filter(|c| c["recommended"] == true)
        .collect();
    assert_eq!(picked.len(), 1, "{o:#}");
    assert_eq!(picked[0]["name"], "do_nothing", "{o:#}");
    for c in options.iter().filter(|c| c["name"] != "do_nothing") {
        assert!(
            c["refused"]
                .as_str()
                .is_some_and(|r| r.contains("no Kueue workload or Volcano group")),
            "{c:#}"
        );
    }
    let dry = text(&lab.nightshift(&["preempt", &id, "--dry-run"]));
    assert!(dry.contains("refused:"), "{dry}");
    assert!(dry.contains("no Kueue workload or Volcano group"), "{dry}");
    // A node cordoned by hand with a pod still on it.
    let node = "gpu-06";
    let out = lab.kubectl(&["cordon", node]);
    assert!(out.status.success(), "{}", text(&out));
    let out = lab.nightshift(&["options", node, "-o", "json"]);
    assert!(out.status.success(), "{}", text(&out));
    let o: Value = serde_json::from_slice(&out.stdout).expect("json");
    let pick = o["options"]
        .as_array()
        .and_then(|a| a.iter().find(|c| c["recommended"] == true))
        .unwrap_or_else(|| panic!("{o:#}"));
    assert!(
        pick["title"]
            .as_str()
            .is_some_and(|t| t.contains("once its jobs end")),
        "{o:#}"
    );
    let dry = text(&lab.nightshift(&["validate", node, "--dry-run"]));
    assert!(dry.contains("still runs job"), "{dry}");
}

/// Issue 58 on Kubernetes: a drain's preview said "GPUs freed 32 … whole
/// gang requeued", but only the node's own pod was evicted and the Kueue
/// workload's other pods ran on. Now a gang no PodDisruptionBudget
/// protects is requeued whole through its workload, as previewed (the
/// calls sent are the calls listed), and kubectl sees every one of its
/// pods gone, on every node; a protected pod is still only evicted, its
/// refusal said (`nightshift_cordons_drains_and_requeues…`).
#[test]
fn a_drain_requeues_an_unprotected_kueue_gang_whole_as_previewed() {
    use common::sent::{assert_sent_as_previewed, of_kube, previewed};
    if !kubectl_here() {
        return;
    }
    let lab = KubeLab::start();
    let cfg = lab_config(&lab, "[kube]\nevict_timeout_s = 3\n");
    let out = lab.kubectl(&["delete", "pdb", "-n", "team-a", "llm-pretrain-pdb"]);
    assert!(out.status.success(), "{}", text(&out));
    let gang = || -> Vec<String> {
        lab.kubectl_json(&["get", "pods", "-n", "team-a", "-o", "json"])["items"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|p| p["metadata"]["name"].as_str().map(str::to_string))
            .filter(|n| n.starts_with("llm-pretrain-worker-"))
            .collect()
    };
    assert_eq!(gang().len(), 4, "the gang runs on four nodes");
    let from = lab.lab.writes_so_far().len();
    let args = [
        "--config",
        cfg.as_str(),
        "drain",
        "gpu-02",
        "--reason",
        "xid storm",
        "--requeue",
        "--confirm",
        "gpu-02",
    ];
    let out = lab.nightshift(&args);
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    assert!(
        t.contains("PATCH /apis/kueue.x-k8s.io/v1beta1/namespaces/team-a/workloads/"),
        "the gang requeued through its workload: {t}"
    );
    let mine: Vec<kubelab::Write> = lab.lab.writes_so_far()[from..]
        .iter()
        .filter(|w| !w.agent.starts_with("kubectl"))
        .cloned()
        .collect();
    assert_sent_as_previewed("drain gpu-02", &previewed(&t), &of_kube(&mine));
    assert!(
        gang().is_empty(),
        "every pod of the gang, on every node: {:?}",
        gang()
    );
}

/// Marks `node` with an Xid 79 as a GPU health operator would: a node
/// condition the engine reads as the GPU's fault.
fn xid_79_condition(lab: &KubeLab, node: &str) {
    let status = r#"{"status":{"conditions":[
        {"type":"Ready","status":"True","reason":"KubeletReady","message":"kubelet is posting ready status","lastTransitionTime":"2026-11-20T10:00:00Z"},
        {"type":"GpuXidError","status":"True","reason":"XidCritical","message":"GPU 2: Xid 79 (GPU has fallen off the bus)","lastTransitionTime":"2026-11-27T02:47:00Z"}]}}"#;
    let out = lab.kubectl(&[
        "patch",
        "node",
        node,
        "--subresource=status",
        "--type=merge",
        "-p",
        status,
    ]);
    assert!(out.status.success(), "{}", text(&out));
}

/// The autopilot on Kubernetes (issue 61; kube-lab, the tests' stand-in
/// API server, checked with kubectl): a node whose GPU reports an Xid 79
/// is drained by `nightshift autopilot` as `policy:gpu-faults` — kubectl
/// sees it cordoned and its pods evicted — with no key pressed; with the
/// circuit breaker at its limit, a second node's Xid 79 pages (a
/// PagerDuty stand-in) and nothing is sent.
#[test]
fn the_autopilot_drains_an_xid_79_node_on_kubernetes_and_pages_at_the_breaker() {
    if !kubectl_here() {
        return;
    }
    let lab = KubeLab::start();
    let policies = include_str!("../config/policies.example.toml")
        .replace("mode = \"shadow\"", "mode = \"live\"");
    let pd = common::pagerduty::PagerDuty::start();
    let paging = format!(
        "[paging.pagerduty]\nrouting_key = \"0123456789abcdef0123456789abcdef\"\nurl = \"{}\"\n",
        pd.url()
    );
    let cfg = lab_config(
        &lab,
        &format!("[kube]\nevict_timeout_s = 3\n{paging}{policies}"),
    );
    xid_79_condition(&lab, "gpu-06");
    let out = lab.nightshift(&[
        "--config",
        &cfg,
        "autopilot",
        "--interval",
        "1s",
        "--for",
        "4s",
    ]);
    let said = text(&out);
    assert!(out.status.success(), "{said}");
    assert!(said.contains("XID 79 on gpu-06"), "{said}");
    let n = lab.kubectl_json(&["get", "node", "gpu-06", "-o", "json"]);
    assert_eq!(n["spec"]["unschedulable"], true, "{said}");
    let pods = lab.kubectl_json(&[
        "get",
        "pods",
        "-A",
        "--field-selector",
        "spec.nodeName=gpu-06",
        "-o",
        "json",
    ]);
    // Its workload pods evicted; a DaemonSet's stay, as with kubectl
    // drain --ignore-daemonsets.
    let left: Vec<Value> = items(&pods)
        .into_iter()
        .filter(|p| p["metadata"]["ownerReferences"][0]["kind"] != "DaemonSet")
        .collect();
    assert!(left.is_empty(), "its pods evicted: {left:#?}\n{said}");
    assert!(said.contains("done and verified"), "{said}");
    let audit = std::fs::read_to_string(lab.dir.path().join("audit.jsonl")).expect("audit");
    let intents: Vec<Value> = audit
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).expect("record"))
        .filter(|r| r["phase"] == "intent")
        .collect();
    // gpu-06, and the lab's own Xid 79 on gpu-03 (an Event): its drain
    // cordons, and the eviction its PDB refuses makes it partly done — a
    // person decides, paged.
    let drained: Vec<(&str, &str, bool)> = intents
        .iter()
        .map(|r| {
            (
                r["operator"].as_str().unwrap_or(""),
                r["target"].as_str().unwrap_or(""),
                r["action"] == "drain",
            )
        })
        .collect();
    assert_eq!(
        drained,
        [
            ("policy:gpu-faults", "gpu-06", true),
            ("policy:gpu-faults", "gpu-03", true)
        ],
        "{audit}"
    );
    let events = pd.accepted();
    assert_eq!(events.len(), 1, "{events:#?}\n{said}");
    assert_eq!(events[0]["payload"]["source"], "gpu-03");
    assert!(
        events[0]["payload"]["summary"]
            .as_str()
            .is_some_and(|s| s.contains("PARTLY DONE") && s.contains("PDB")),
        "{events:#?}"
    );
    // The breaker at one node in ten minutes: gpu-06 counts.
    std::fs::write(
        &cfg,
        format!("[kube]\nevict_timeout_s = 3\n[actions]\nmax_partition_share_out = 0.75\nmax_nodes_per_window = 1\n{paging}{policies}"),
    )
    .expect("config");
    xid_79_condition(&lab, "gpu-07");
    let out = lab.nightshift(&[
        "--config",
        &cfg,
        "autopilot",
        "--interval",
        "1s",
        "--for",
        "3s",
    ]);
    let said = text(&out);
    assert!(out.status.success(), "{said}");
    assert!(said.contains("circuit breaker"), "{said}");
    let n = lab.kubectl_json(&["get", "node", "gpu-07", "-o", "json"]);
    assert_ne!(n["spec"]["unschedulable"], true, "nothing sent: {said}");
    let after = std::fs::read_to_string(lab.dir.path().join("audit.jsonl")).expect("audit");
    assert_eq!(
        after.lines().filter(|l| l.contains("\"intent\"")).count(),
        2,
        "nothing more sent: {after}"
    );
    // gpu-03's drain was sent already: not sent again, not paged again.
    let events = pd.accepted();
    assert_eq!(events.len(), 2, "{events:#?}\n{said}");
    assert_eq!(events[1]["payload"]["source"], "gpu-07");
}
