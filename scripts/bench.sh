#!/usr/bin/env bash
# Scale benchmarks (issue 14): the engine and scale benches, then the
# console's steady state on the 10,000-node simulated cluster — resident
# memory and CPU of the TUI read from /proc while it runs in a tmux pane.
#   scripts/bench.sh                 # NODES=10000 JOBS=100000 SECS=120 WARM=30
# Figures go to stdout; docs/performance.md keeps them with the date.
set -euo pipefail
cd "$(dirname "$0")/.."
NODES=${NODES:-10000} JOBS=${JOBS:-100000} SECS=${SECS:-120} WARM=${WARM:-30}

echo "# $(date -u +%F) on $(nproc) cores: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
cargo bench --bench engine 2>/dev/null | grep -v '^\s*$' || true
cargo bench --bench scale 2>/dev/null | grep -v '^\s*$' || true

cargo build --release -q
command -v tmux >/dev/null || { echo "bench.sh: tmux is needed for the console's figures" >&2; exit 1; }
sock="nightshift-bench-$$"
log=$(mktemp)
tmux -L "$sock" new-session -d -x 200 -y 50 \
  "exec target/release/nightshift --nodes $NODES --jobs $JOBS --speed 1 --log-file $log"
trap 'tmux -L "$sock" kill-server 2>/dev/null || true; rm -f "$log"' EXIT
pid=$(tmux -L "$sock" display -p '#{pane_pid}')
hz=$(getconf CLK_TCK)
ticks() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
field() { awk -v f="$1" '$1 == f":" {printf "%.0f", $2 / 1024}' "/proc/$pid/status"; }
sleep "$WARM"
t0=$(ticks); rss0=$(field VmRSS)
sleep "$SECS"
t1=$(ticks); rss1=$(field VmRSS); hwm=$(field VmHWM)
cpu=$(awk -v a="$t0" -v b="$t1" -v hz="$hz" -v s="$SECS" 'BEGIN {printf "%.1f", 100 * (b - a) / hz / s}')
echo
echo "## the console, --nodes $NODES --jobs $JOBS --speed 1, 200x50 tmux pane"
echo "| after warm-up (${WARM}s) RSS | after ${SECS}s more RSS | peak (VmHWM) | CPU over the ${SECS}s | targets |"
echo "|---|---|---|---|---|"
echo "| ${rss0} MB | ${rss1} MB | ${hwm} MB | ${cpu} % of a core | ≤ 250 MB, ≤ 10 % |"
