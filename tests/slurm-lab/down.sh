#!/usr/bin/env bash
# Stops the cluster that up.sh started in $LAB: cancels its jobs, then kills
# every daemon by the pid in its pid file.
set -uo pipefail
: "${LAB:?set LAB}"
export SLURM_CONF=$LAB/etc/slurm.conf
scancel --quiet --user=root 2>/dev/null
scancel --quiet --user=alice 2>/dev/null
# shellcheck source=lab.sh
. "$(dirname "$0")/lab.sh"
stop_daemons "$LAB"
exit 0
