#!/usr/bin/env bash
# Starts a private Slurm 24.11 cluster for nightshift's live tests, inside
# the Debian 13 chroot that chroot-24.11.sh makes: one slurmctld, four
# emulated nodes gpu01..gpu04 with 8 fake h100 GPUs each, and slurmrestd
# (REST v0.0.40, v0.0.41, v0.0.42, JWT) on 127.0.0.1:$REST_PORT and on the
# unix socket $LAB/run/rest.sock. The daemons share one private mount
# namespace (proc mounted for them only), held by a sleeper whose pid is
# run/ns.pid; it vanishes with them. $LAB must lie inside the chroot.
#
#   ROOT=… LAB=$ROOT/tmp/lab CTLD_PORT=… NODE_PORT0=… REST_PORT=… up-24.11.sh
#
# Writes $LAB/bin/lab (runs a command in the lab: `lab squeue -h`) and
# prints SLURM_JWT=<token for root> on its last line; down-24.11.sh stops it.
set -euo pipefail
: "${ROOT:?set ROOT to the chroot (chroot-24.11.sh prints it)}"
: "${LAB:?set LAB to a fresh directory inside ROOT}"
CTLD_PORT=${CTLD_PORT:-6817}
NODE_PORT0=${NODE_PORT0:-17001}
REST_PORT=${REST_PORT:-6820}
ROOT=$(realpath "$ROOT")
mkdir -p "$LAB"
LAB=$(realpath "$LAB")
IN=${LAB#"$ROOT"}
[ "$IN" != "$LAB" ] || { echo "LAB ($LAB) must lie inside ROOT ($ROOT)" >&2; exit 1; }

# shellcheck source=lab.sh
. "$(dirname "$0")/lab.sh"
# 24.11 packages no switch/none or jobcomp/none plugin: no such lines.
# The 26.05 lab (SLURM=26.05, ROOT the forky chroot) is made the same way:
# its own cluster name, and slurmrestd with every data parser it ships
# (v0.0.42–v0.0.45; v0.0.40/41 are gone there).
case ${SLURM:-24.11} in
  26.05) CLUSTER=lab26 PARSERS= ;;
  *) CLUSTER=lab24 PARSERS=v0.0.40,v0.0.41,v0.0.42 ;;
esac
lab_files "$LAB" "$IN" "$CLUSTER" ""
mkdir -p "$LAB/bin"
chmod 1777 "$LAB/run"
# slurmd 24.11 always starts a cgroup plugin, and dies without a mounted
# cgroup filesystem: switch it off.
echo "CgroupPlugin=disabled" > "$LAB/etc/cgroup.conf"

# The namespace holder: proc mounted privately, then sleeps until killed.
unshare --mount --propagation private --fork -- bash -c \
  "mount -t proc proc '$ROOT/proc' && exec sleep infinity" </dev/null >/dev/null 2>&1 &
holder=$!
# unshare forks: the sleeper is its child.
for _ in $(seq 1 50); do
  ns_pid=$(pgrep -P "$holder" sleep || true)
  [ -n "$ns_pid" ] && break
  sleep 0.05
done
[ -n "${ns_pid:-}" ] || { echo "the lab's namespace did not start" >&2; exit 1; }
echo "$ns_pid" >"$LAB/run/ns.pid"

cat > "$LAB/bin/lab" <<WRAP
#!/usr/bin/env bash
# Runs a command inside this lab: its mount namespace, the chroot, its slurm.conf.
exec nsenter --mount=/proc/$ns_pid/ns/mnt -- chroot "$ROOT" env -i \
  PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root SLURM_CONF="$IN/etc/slurm.conf" \
  \${LAB_ENV:-} sh -c 'cd "$IN/jobs" && exec "\$@"' lab "\$@"
WRAP
# The chroot's scontrol, sbatch and scancel for this lab (22.05's cannot
# talk to 24.11); nightshift runs sbatch and scancel from beside scontrol.
for tool in scontrol sbatch scancel; do
  cat > "$LAB/bin/$tool" <<WRAP
#!/usr/bin/env bash
exec "$LAB/bin/lab" $tool "\$@"
WRAP
  chmod +x "$LAB/bin/$tool"
done
chmod +x "$LAB/bin/lab"
# Paths under $LAB mean the same inside the chroot as outside (a job's
# output written there is read here): $LAB, seen from inside, leads to $IN.
mkdir -p "$ROOT$(dirname "$LAB")"
ln -sfn "$IN" "$ROOT$LAB"
echo "$ROOT$LAB" >"$LAB/run/self-link"
lab=$LAB/bin/lab
for _ in $(seq 1 50); do
  $lab test -e /proc/self/status && break
  sleep 0.05
done

$lab slurmctld
for n in gpu01 gpu02 gpu03 gpu04; do $lab slurmd -N "$n"; done

# Wait for the four nodes to register idle.
idle=0
for _ in $(seq 1 150); do
  idle=$($lab sinfo -h -N -o '%N %T' 2>/dev/null | grep ' idle$' | sort -u | grep -c . || true)
  [ "$idle" = 4 ] && break
  sleep 0.1
done
[ "$idle" = 4 ] || {
  echo "nodes did not come up: $($lab sinfo -N 2>&1)" >&2
  tail -20 "$LAB/log/slurmctld.log" "$LAB"/log/slurmd-*.log >&2 || true
  exit 1
}

LAB_ENV=SLURM_JWT=daemon $lab sh -c "nohup slurmrestd -u slurmrest -g slurmrest -a rest_auth/jwt \
  -s openapi/slurmctld ${PARSERS:+-d $PARSERS} 127.0.0.1:$REST_PORT unix:$IN/run/rest.sock \
  >$IN/log/slurmrestd.log 2>&1 & echo \$! >$IN/run/slurmrestd.pid"
code=
for _ in $(seq 1 100); do
  code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$REST_PORT/openapi/v3" || true)
  [ "$code" = 401 ] && [ -S "$LAB/run/rest.sock" ] && break
  sleep 0.1
done
[ "$code" = 401 ] || { echo "slurmrestd did not come up ($code): $(cat "$LAB/log/slurmrestd.log")" >&2; exit 1; }
echo "SLURM_JWT=$($lab scontrol token username=root lifespan=7200 | sed -n 's/^SLURM_JWT=//p')"
