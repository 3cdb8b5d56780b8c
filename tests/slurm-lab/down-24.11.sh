#!/usr/bin/env bash
# Stops the 24.11 cluster that up-24.11.sh started in $LAB: cancels its jobs,
# kills every daemon by its pid file, then whatever else still runs with
# its root in the chroot from this lab (job scripts, slurmstepd), and last
# the namespace holder, which takes the lab's proc mount with it.
set -uo pipefail
: "${LAB:?set LAB}"
lab=$LAB/bin/lab
if [ -x "$lab" ]; then
  $lab scancel --quiet --user=root 2>/dev/null
  $lab scancel --quiet --user=alice 2>/dev/null
fi
# shellcheck source=lab.sh
. "$(dirname "$0")/lab.sh"
stop_daemons "$LAB"
# Only processes in this lab's mount namespace, never another lab's.
if [ -f "$LAB/run/ns.pid" ]; then
  ns_pid=$(cat "$LAB/run/ns.pid")
  ns=$(readlink "/proc/$ns_pid/ns/mnt" 2>/dev/null || true)
  if [ -n "$ns" ]; then
    for p in /proc/[0-9]*; do
      pid=${p#/proc/}
      [ "$pid" = "$ns_pid" ] && continue
      [ "$(readlink "$p/ns/mnt" 2>/dev/null)" = "$ns" ] && kill -9 "$pid" 2>/dev/null
    done
  fi
  kill "$ns_pid" 2>/dev/null
fi
# The chroot's link to this lab (up-24.11.sh).
if [ -f "$LAB/run/self-link" ]; then
  rm -f "$(cat "$LAB/run/self-link")"
fi
exit 0
