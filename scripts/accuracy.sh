#!/usr/bin/env bash
# How right nightshift's queue answers are, measured against Slurm itself
# on a real, loaded Slurm (the live-test labs): for every pending job, the
# reason nightshift's own plan infers against Slurm's Reason, and its
# estimated start against Slurm's backfill estimate (squeue --start) and,
# after letting the lab run, against the job's actual start.
#
#   sudo scripts/accuracy.sh [22.05|24.11]    # RUN_MIN=30 PENDING=400 LIMIT_MAX=3 SEED=7
#
# The load (seeded): 1-2 node jobs of 1/2/4/8 GPUs, time limits of 1 to
# LIMIT_MAX minutes, each running to its limit (sleep past it); gangs; dependencies
# (afterany); a few held; two partitions sharing nodes; fragmentation from
# the mix. Needs root and the lab packages (tests/slurm-lab/README.md).
# Prints a markdown summary (scripts/accuracy-report.py, which re-reads a
# finished run: accuracy-report.py OUT T0 VERSION RUN_MIN); raw answers and
# rows go to $OUT (default /tmp/accuracy-V).
set -euo pipefail
cd "$(dirname "$0")/.."
V=${1:-22.05}
RUN_MIN=${RUN_MIN:-30}
PENDING=${PENDING:-400}
LIMIT_MAX=${LIMIT_MAX:-3}
SEED=${SEED:-7}
OUT=${OUT:-/tmp/accuracy-$V}
mkdir -p "$OUT"
cargo build --release --quiet
NS=$PWD/target/release/nightshift
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

root=""
case $V in
  22.05) lab=$(mktemp -d /tmp/ns-acc-XXXX); up=up.sh; down=down.sh ;;
  24.11) root=$(bash tests/slurm-lab/chroot-24.11.sh)
         lab=$(mktemp -d "$root/tmp/ns-acc-XXXX"); up=up-24.11.sh; down=down-24.11.sh ;;
  *) echo "version: 22.05 or 24.11" >&2; exit 2 ;;
esac
rest=$(free_port)
out=$(ROOT=$root LAB=$lab CTLD_PORT=$(free_port) REST_PORT=$rest NODE_PORT0=$((20000 + RANDOM % 20000)) \
      bash tests/slurm-lab/$up)
export SLURM_JWT=${out##*SLURM_JWT=}
trap 'LAB=$lab bash tests/slurm-lab/$down >/dev/null 2>&1; rm -rf "$lab"' EXIT
slurm() { # a Slurm client against the lab, in its jobs directory (slurm-N.out)
  if [ "$V" = 24.11 ]; then "$lab/bin/lab" "$@"; else (cd "$lab/jobs" && SLURM_CONF=$lab/etc/slurm.conf "$@"); fi
}

# The load, from a seed: one sbatch line per job.
python3 - "$SEED" "$PENDING" "$LIMIT_MAX" >"$OUT/load.txt" <<'PY'
import random, sys
rnd = random.Random(int(sys.argv[1]))
n = 14 + int(sys.argv[2])
for i in range(n):
    g = rnd.choices([1, 2, 4, 8], [40, 30, 20, 10])[0]
    nodes = 2 if g == 8 and rnd.random() < 0.4 else 1
    limit = rnd.randint(1, int(sys.argv[3]))
    part = "pair" if rnd.random() < 0.15 else "gpu"
    extra = []
    if i > 20 and rnd.random() < 0.05:
        extra.append(f"--dependency=afterany:{{job{rnd.randint(1, i - 1)}}}")
    if i > 14 and rnd.random() < 0.03:
        extra.append("--hold")
    gres = f"--gpus-per-node={g}" if nodes > 1 else f"--gres=gpu:{g}"
    print(f"-J acc{i} -p {part} -N{nodes} {gres} -c1 --mem=1G -t {limit} {' '.join(extra)}")
PY
echo "submitting $(wc -l <"$OUT/load.txt") jobs to Slurm $V…" >&2
declare -a ids=()
i=0
while read -r line; do
  # {jobK}: the id of the K-th job submitted.
  while [[ $line =~ \{job([0-9]+)\} ]]; do
    k=${BASH_REMATCH[1]}
    line=${line/\{job$k\}/${ids[$((k - 1))]}}
  done
  # shellcheck disable=SC2086
  ids[i]=$(slurm sbatch --parsable $line --wrap "sleep 100000")
  i=$((i + 1))
done <"$OUT/load.txt"

# Let the main scheduler and one backfill pass (bf_interval 30 s) see them.
sleep 40
t0=$(date +%s)
slurm squeue -h -t pending -o '%i|%r|%Q' >"$OUT/squeue.txt"
slurm squeue -h --start -t pending -o '%i|%S' >"$OUT/squeue-start.txt"
# NS_CONFIG: a nightshift config for the run (e.g. [engine] limit_overrun).
"$NS" ${NS_CONFIG:+--config "$NS_CONFIG"} --source slurm --slurm-url "http://127.0.0.1:$rest" --slurm-user root \
  --log-file "$OUT/ns.log" get jobs -o json >"$OUT/nightshift.json"
echo "snapshot at $t0; watching for $RUN_MIN min…" >&2

# Actual starts: the first time each job is seen running, its StartTime.
: >"$OUT/starts.txt"
end=$((t0 + RUN_MIN * 60))
while [ "$(date +%s)" -lt "$end" ]; do
  slurm squeue -h -t running,completed,timeout,cancelled -o '%i|%S|%T' >>"$OUT/starts.txt" || true
  sleep 10
done

python3 scripts/accuracy-report.py "$OUT" "$t0" "$V" "$RUN_MIN"
