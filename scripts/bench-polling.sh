#!/usr/bin/env bash
# What watching a loaded Slurm costs the cluster: nightshift's TUI against
# squeue polled at the same refresh and turm (a squeue-based Slurm TUI), on
# a real Slurm 22.05 and a real Slurm 24.11 (the live-test labs), loaded
# with $JOBS jobs. For each tool, over $SECS seconds: its own CPU, and the
# CPU slurmrestd and slurmctld spent beyond their idle baseline.
#
#   sudo scripts/bench-polling.sh [22.05|24.11|both]     # JOBS=5000 SECS=120 REFRESH=2
#
# Needs root, the lab packages (see tests/slurm-lab/README.md), tmux, and
# turm on PATH (`cargo install turm` or `pip install turm`; skipped without).
# Prints one markdown table per version; docs/performance.md has results.
set -euo pipefail
cd "$(dirname "$0")/.."
WHICH=${1:-both}
JOBS=${JOBS:-5000}
# Long enough to hold one of nightshift's every-record fetches (2 min at
# most); each tool runs WARM seconds before its window opens, so start-up
# (its first full read) is measured apart, and COOL seconds after it stops.
SECS=${SECS:-120}
WARM=${WARM:-20}
COOL=${COOL:-10}
REFRESH=${REFRESH:-2}
# Which rows: idle squeue ns ns-fast ns-full turm (idle is always measured).
TOOLS=${TOOLS:-squeue ns ns-full turm}
want() { [[ " $TOOLS " == *" $1 "* ]]; }
TCK=$(getconf CLK_TCK)
cargo build --release --quiet
NS=$PWD/target/release/nightshift
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# CPU seconds a process has used, its reaped children included.
cpu() { awk -v t="$TCK" '{ printf "%.2f", ($14+$15+$16+$17)/t }' "/proc/$1/stat" 2>/dev/null || echo 0; }

bench_version() {
  local v=$1 lab root="" up down
  case $v in
    22.05) lab=$(mktemp -d /tmp/ns-bench-XXXX); up=up.sh; down=down.sh ;;
    24.11) root=$(bash tests/slurm-lab/chroot-24.11.sh)
           lab=$(mktemp -d "$root/tmp/ns-bench-XXXX"); up=up-24.11.sh; down=down-24.11.sh ;;
  esac
  local rest; rest=$(free_port)
  local out
  out=$(ROOT=$root LAB=$lab CTLD_PORT=$(free_port) REST_PORT=$rest NODE_PORT0=$((20000 + RANDOM % 20000)) \
        bash tests/slurm-lab/$up)
  local token=${out##*SLURM_JWT=}
  # shellcheck disable=SC2064
  trap "LAB=$lab bash tests/slurm-lab/$down >/dev/null 2>&1; tmux -L nsbench kill-server 2>/dev/null || true; rm -rf $lab" RETURN
  # Slurm clients and a PATH for turm: the host's on 22.05, the chroot's on 24.11.
  local bin=$lab/clients; mkdir -p "$bin"
  for c in squeue sinfo sbatch scontrol scancel; do
    if [ "$v" = 24.11 ]; then
      printf '#!/bin/sh\nexec %s %s "$@"\n' "$lab/bin/lab" "$c" >"$bin/$c"
    else
      printf '#!/bin/sh\ncd %s && SLURM_CONF=%s exec /usr/bin/%s "$@"\n' "$lab/jobs" "$lab/etc/slurm.conf" "$c" >"$bin/$c"
    fi
    chmod +x "$bin/$c"
  done
  # The load: 1-GPU jobs (32 run at once, the rest queue), an hour each.
  echo "loading $JOBS jobs into Slurm $v…" >&2
  (cd "$lab/jobs" && seq 1 "$JOBS" | xargs -P 4 -n 50 sh -c 'for i; do '"$bin"'/sbatch -Q -J load$i --gres=gpu:1 -c1 --mem=1G -t 60 --wrap "sleep 3600"; done' _)
  sleep 5
  local ctld rest_pid
  ctld=$(cat "$lab/run/slurmctld.pid"); rest_pid=$(cat "$lab/run/slurmrestd.pid")
  local cfg=$lab/ns.toml
  echo "| tool | refresh | its own CPU s | slurmrestd CPU s | slurmctld CPU s | total to the cluster s | % of a core |"
  echo "|---|---|---|---|---|---|---|"
  local idle_ctld idle_rest
  # measure NAME REFRESH-NOTE -- start a tool (its pid on stdout) or nothing.
  measure() {
    local name=$1 note=$2 start=$3
    local c0 r0 c1 r1 pid="" own=0 own0=0
    [ -n "$start" ] && pid=$($start)
    sleep "$WARM"
    [ -n "$pid" ] && own0=$(cpu "$pid")
    c0=$(cpu "$ctld"); r0=$(cpu "$rest_pid")
    sleep "$SECS"
    [ -n "$pid" ] && own=$(echo "$(cpu "$pid") - $own0" | bc)
    c1=$(cpu "$ctld"); r1=$(cpu "$rest_pid")
    seen=$(tmux -L nsbench capture-pane -p 2>/dev/null | grep -o 'Jobs ([0-9]*)\|[0-9]* pending' | head -1 || true)
    tmux -L nsbench kill-server 2>/dev/null || true
    [ -n "$pid" ] && { kill "$pid" 2>/dev/null || true; }
    sleep "$COOL"
    local dc dr
    dc=$(echo "$c1 - $c0" | bc); dr=$(echo "$r1 - $r0" | bc)
    if [ "$name" = idle ]; then
      idle_ctld=$dc; idle_rest=$dr
      printf '| idle (subtracted below) | - | - | %.2f | %.2f | - | - |\n' "$dr" "$dc"
      return
    fi
    dc=$(echo "x=$dc - ${idle_ctld:-0}; if (x<0) 0 else x" | bc)
    dr=$(echo "x=$dr - ${idle_rest:-0}; if (x<0) 0 else x" | bc)
    local total; total=$(echo "$own + $dc + $dr" | bc)
    printf '| %s | %s | %.2f | %.2f | %.2f | %.2f | %.1f%% |\n' "$name${seen:+ (shows $seen)}" "$note" "$own" "$dr" "$dc" "$total" \
      "$(echo "scale=4; 100 * $total / $SECS" | bc)"
  }
  tui() { # a command in a detached 200x50 tmux pane; prints its pid
    # tmux's own environment wins over -e: set it in the command.
    tmux -L nsbench new-session -d -x 200 -y 50 "exec env SLURM_JWT=$token PATH=$bin:$PATH $1"
    sleep 0.2
    tmux -L nsbench display -p '#{pane_pid}'
  }
  start_squeue() {
    ( while true; do "$bin/squeue" -a >/dev/null; sleep "$REFRESH"; done ) >/dev/null 2>&1 &
    echo $!
  }
  start_ns() { tui "$NS --config $cfg --source slurm --slurm-url http://127.0.0.1:$rest --slurm-user root --log-file $lab/ns.log"; }
  start_turm() { tui "turm --slurm-refresh $REFRESH -a"; }
  measure idle "-" ""
  if want squeue; then measure "squeue -a" "every ${REFRESH}s" start_squeue; fi
  # measure_ns NAME EXTRA-CONFIG: nightshift's TUI with [slurm] interval_s
  # and EXTRA-CONFIG lines, then what it said of its refresh.
  measure_ns() {
    printf '[slurm]\ninterval_s = %s\n%s' "$REFRESH" "$2" >"$cfg"
    : >"$lab/ns.log"
    measure "$1" "see below" start_ns
    local said; said=$(grep -o 'slurm: a poll every.*' "$lab/ns.log" | tail -1 || true)
    echo "|  (nightshift said: ${said:-nothing}) | | | | | | |"
  }
  if want ns; then measure_ns "nightshift TUI (default budget 3%)" ""; fi
  # Job states every REFRESH seconds: a budget big enough for that.
  if want ns-fast; then measure_ns "nightshift TUI (rest_budget 8%)" $'rest_budget = 0.08\n'; fi
  if want ns-full; then
    measure_ns "nightshift TUI (no budget, every record every ${REFRESH}s)" \
      "$(printf 'rest_budget = 1.0\nfull_jobs_interval_s = %s\n' "$REFRESH")"$'\n'
  fi
  if want turm; then
    if command -v turm >/dev/null; then
      measure "turm $(turm --version | awk '{print $2}')" "every ${REFRESH}s" start_turm
    else
      echo "| turm | not installed | | | | | |"
    fi
  fi
  echo
  echo "Slurm $v, $("$bin/squeue" -h -a | wc -l) jobs ($("$bin/squeue" -h -a -t running | wc -l) running), ${SECS}s per tool after ${WARM}s of warm-up, refresh ${REFRESH}s, $(nproc) cores."
}

for v in 22.05 24.11; do
  [ "$WHICH" = both ] || [ "$WHICH" = "$v" ] || continue
  echo
  echo "### Slurm $v"
  echo
  bench_version "$v"
done
