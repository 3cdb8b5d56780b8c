#!/usr/bin/env bash
# Scale benchmarks (issue 14): the engine and scale benches, then the
# console's steady state on the 10,000-node simulated cluster — resident
# memory and CPU of the TUI read from /proc while it runs in a tmux pane,
# and the bytes it writes to its terminal (a pty kept by script(1)).
#   scripts/bench.sh                 # NODES=10000 JOBS=100000 SECS=120 WARM=30
#   CONSOLE_ONLY=1 scripts/bench.sh  # the console's figures alone
#   BIN=path/to/nightshift CONSOLE_ONLY=1 scripts/bench.sh  # another build's
#   EVERY=60 SECS=600 CONSOLE_ONLY=1 scripts/bench.sh  # RSS sampled each minute
# (issue 42's measure: the line holds at every sample, not only at two)
# Figures go to stdout; docs/performance.md keeps them with the date.
set -euo pipefail
cd "$(dirname "$0")/.."
NODES=${NODES:-10000} JOBS=${JOBS:-100000} SECS=${SECS:-120} WARM=${WARM:-30}

echo "# $(date -u +%F) on $(nproc) cores: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
if [ -z "${CONSOLE_ONLY:-}" ]; then
  cargo bench --bench engine 2>/dev/null | grep -v '^\s*$' || true
  cargo bench --bench scale 2>/dev/null | grep -v '^\s*$' || true
fi

BIN=${BIN:-}
if [ -z "$BIN" ]; then
  cargo build --release -q
  BIN=target/release/nightshift
fi
command -v tmux >/dev/null || { echo "bench.sh: tmux is needed for the console's figures" >&2; exit 1; }
sock="nightshift-bench-$$"
log=$(mktemp)
# The console runs under script(1), which keeps every byte it writes to its
# pty: the file's growth is the bytes per second a user's SSH link carries.
ts=$(mktemp)
tmux -L "$sock" new-session -d -x 200 -y 50 \
  "exec script -q -f -c 'exec $BIN --nodes $NODES --jobs $JOBS --speed 1 --log-file $log' $ts"
# The console too: script(1) outlives the tmux server it ran in.
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; tmux -L "$sock" kill-server 2>/dev/null || true; rm -f "$log" "$ts"' EXIT
sleep 2
pid=$(pgrep -P "$(tmux -L "$sock" display -p '#{pane_pid}')" | head -1)
hz=$(getconf CLK_TCK)
ticks() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
field() { awk -v f="$1" '$1 == f":" {printf "%.0f", $2 / 1024}' "/proc/$pid/status"; }
sleep "$WARM"
t0=$(ticks); rss0=$(field VmRSS); b0=$(stat -c %s "$ts")
samples="$rss0"
if [ -n "${EVERY:-}" ]; then
  for _ in $(seq 1 $((SECS / EVERY))); do
    sleep "$EVERY"
    samples="$samples $(field VmRSS)"
  done
  sleep $((SECS % EVERY))
else
  sleep "$SECS"
fi
t1=$(ticks); rss1=$(field VmRSS); hwm=$(field VmHWM); b1=$(stat -c %s "$ts")
cpu=$(awk -v a="$t0" -v b="$t1" -v hz="$hz" -v s="$SECS" 'BEGIN {printf "%.1f", 100 * (b - a) / hz / s}')
bps=$(awk -v a="$b0" -v b="$b1" -v s="$SECS" 'BEGIN {printf "%.0f", (b - a) / s}')
echo
echo "## the console, --nodes $NODES --jobs $JOBS --speed 1, 200x50 tmux pane"
echo "| after warm-up (${WARM}s) RSS | after ${SECS}s more RSS | peak (VmHWM) | CPU over the ${SECS}s | bytes to the pty | targets |"
echo "|---|---|---|---|---|---|"
echo "| ${rss0} MB | ${rss1} MB | ${hwm} MB | ${cpu} % of a core | ${bps} B/s | ≤ 250 MB, ≤ 10 % |"
if [ -n "${EVERY:-}" ]; then
  echo
  echo "RSS every ${EVERY}s from the warm-up's end (MB): $samples"
  echo "$samples" | tr ' ' '\n' | sort -n | awk '{a[NR]=$1} END {printf "min %d, median %d, max %d MB over %d samples\n", a[1], a[int((NR+1)/2)], a[NR], NR}'
fi
