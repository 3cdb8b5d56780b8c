#!/usr/bin/env bash
# Starts a private Slurm 22.05 cluster for nightshift's live tests: one
# slurmctld, four emulated nodes gpu01..gpu04 with 8 fake h100 GPUs each,
# and slurmrestd with JWT auth on 127.0.0.1:$REST_PORT. All state lives in
# $LAB; nothing under /etc/slurm is touched. Needs root and Debian's
# slurmctld slurmd slurm-client slurmrestd slurm-wlm-jwt-plugin packages.
# Recipe and pitfalls: see README.md beside this script.
#
#   LAB=/tmp/lab CTLD_PORT=6817 NODE_PORT0=17001 REST_PORT=6820 up.sh
#
# Prints SLURM_JWT=<token for root> on its last line; down.sh stops it.
set -euo pipefail
: "${LAB:?set LAB to a fresh directory}"
CTLD_PORT=${CTLD_PORT:-6817}
NODE_PORT0=${NODE_PORT0:-17001}
REST_PORT=${REST_PORT:-6820}
export SLURM_CONF=$LAB/etc/slurm.conf

# Labs start in parallel (one per test): a user the other lab created
# between `id` and `useradd` is there all the same.
id slurmrest >/dev/null 2>&1 || useradd -r -M -s /usr/sbin/nologin slurmrest 2>/dev/null || id slurmrest >/dev/null
id alice >/dev/null 2>&1 || useradd -m -s /bin/bash alice 2>/dev/null || id alice >/dev/null

# shellcheck source=lab.sh
. "$(dirname "$0")/lab.sh"
lab_files "$LAB" "$LAB" lab "JobCompType=jobcomp/none
SwitchType=switch/none"

slurmctld
for n in gpu01 gpu02 gpu03 gpu04; do slurmd -N "$n"; done

# Wait for the four nodes to register idle.
for _ in $(seq 1 100); do
  idle=$(sinfo -h -N -o '%N %T' 2>/dev/null | grep ' idle$' | sort -u | grep -c . || true)
  [ "$idle" = 4 ] && break
  sleep 0.1
done
[ "$idle" = 4 ] || { echo "nodes did not come up: $(sinfo -N 2>&1)" >&2; exit 1; }

SLURM_JWT=daemon nohup slurmrestd -u slurmrest -a rest_auth/jwt \
  -s openapi/v0.0.38,openapi/v0.0.37,openapi/v0.0.36 "127.0.0.1:$REST_PORT" \
  >"$LAB/log/slurmrestd.log" 2>&1 &
echo $! >"$LAB/run/slurmrestd.pid"
for _ in $(seq 1 100); do
  code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$REST_PORT/openapi" || true)
  [ "$code" = 401 ] && break
  sleep 0.1
done
[ "$code" = 401 ] || { echo "slurmrestd did not come up: $(cat "$LAB/log/slurmrestd.log")" >&2; exit 1; }
scontrol token username=root lifespan=7200
