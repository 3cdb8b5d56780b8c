#!/usr/bin/env bash
# Stops the cluster that up.sh started in $LAB: cancels its jobs, then kills
# every daemon by the pid in its pid file.
set -uo pipefail
: "${LAB:?set LAB}"
export SLURM_CONF=$LAB/etc/slurm.conf
scancel --quiet --user=root 2>/dev/null
scancel --quiet --user=alice 2>/dev/null
for f in "$LAB"/run/slurmrestd.pid "$LAB"/run/slurmd-*.pid "$LAB"/run/slurmctld.pid; do
  [ -f "$f" ] || continue
  pid=$(cat "$f")
  kill "$pid" 2>/dev/null
  for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
  kill -9 "$pid" 2>/dev/null
done
exit 0
