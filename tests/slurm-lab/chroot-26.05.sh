#!/usr/bin/env bash
# Makes (once per machine) a Debian testing (forky) chroot holding Slurm
# 26.05 and Prometheus 3 from Debian's own packages, for the 26.05 live
# tests (up-24.11.sh with SLURM=26.05 runs the daemons inside it).
#
#   ROOT=/var/cache/nightshift/slurm-26.05 chroot-26.05.sh    # prints ROOT
set -euo pipefail
export SUITE=forky
export ROOT=${ROOT:-/var/cache/nightshift/slurm-26.05}
export EXTRA_PACKAGES=prometheus
exec bash "$(dirname "$0")/chroot-24.11.sh"
