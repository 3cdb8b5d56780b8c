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

id slurmrest >/dev/null 2>&1 || useradd -r -M -s /usr/sbin/nologin slurmrest
id alice >/dev/null 2>&1 || useradd -m -s /bin/bash alice

mkdir -p "$LAB"/{etc,state,log,run,dev,jobs}
for n in gpu01 gpu02 gpu03 gpu04; do mkdir -p "$LAB/spool/$n"; done
chmod 755 "$LAB" "$LAB/jobs"
for i in 0 1 2 3 4 5 6 7; do ln -sfn /dev/null "$LAB/dev/nvidia$i"; done
dd if=/dev/urandom of="$LAB/etc/jwt_hs256.key" bs=32 count=1 status=none
chmod 600 "$LAB/etc/jwt_hs256.key"

last_port=$((NODE_PORT0 + 3))
cat > "$SLURM_CONF" <<CONF
ClusterName=lab
SlurmctldHost=localhost
SlurmctldPort=$CTLD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/none
CredType=cred/none
AuthAltTypes=auth/jwt
AuthAltParameters=jwt_key=$LAB/etc/jwt_hs256.key
StateSaveLocation=$LAB/state
SlurmdSpoolDir=$LAB/spool/%n
SlurmctldPidFile=$LAB/run/slurmctld.pid
SlurmdPidFile=$LAB/run/slurmd-%n.pid
SlurmctldLogFile=$LAB/log/slurmctld.log
SlurmdLogFile=$LAB/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SwitchType=switch/none
SlurmdParameters=config_overrides
ReturnToService=2
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=4096
PriorityType=priority/basic
GresTypes=gpu
SlurmctldTimeout=30
SlurmdTimeout=60
InactiveLimit=0
KillWait=5
MinJobAge=600
NodeName=gpu[01-04] NodeHostname=localhost NodeAddr=127.0.0.1 Port=$NODE_PORT0-$last_port Sockets=2 CoresPerSocket=16 ThreadsPerCore=1 RealMemory=512000 Gres=gpu:h100:8 State=UNKNOWN
PartitionName=gpu Nodes=gpu[01-04] Default=YES MaxTime=INFINITE State=UP
PartitionName=pair Nodes=gpu[03-04] MaxTime=INFINITE State=UP
CONF
cat > "$LAB/etc/gres.conf" <<CONF
AutoDetect=off
NodeName=gpu[01-04] Name=gpu Type=h100 File=$LAB/dev/nvidia[0-7]
CONF

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
