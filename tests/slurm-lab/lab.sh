#!/usr/bin/env bash
# What the 22.05 lab (up.sh, down.sh) and the 24.11 lab (up-24.11.sh,
# down-24.11.sh) share. Sourced.
#
#   lab_files LAB IN CLUSTER EXTRA   directories, fake GPU device files, the
#                                    JWT key, slurm.conf, topology.conf and
#                                    gres.conf
#   stop_daemons LAB                 every daemon, by its pid file
#
# LAB: the lab on this host; IN: the same directory as the daemons see it
# (LAB itself, or its path inside the chroot); CLUSTER: ClusterName; EXTRA:
# lines only one version's slurm.conf takes. Reads CTLD_PORT, NODE_PORT0.
lab_files() {
  local LAB=$1 IN=$2 CLUSTER=$3 EXTRA=$4
  mkdir -p "$LAB"/{etc,state,log,run,dev,jobs}
  for n in gpu01 gpu02 gpu03 gpu04; do mkdir -p "$LAB/spool/$n"; done
  chmod 755 "$LAB" "$LAB/jobs"
  for i in 0 1 2 3 4 5 6 7; do ln -sfn /dev/null "$LAB/dev/nvidia$i"; done
  dd if=/dev/urandom of="$LAB/etc/jwt_hs256.key" bs=32 count=1 status=none
  chmod 600 "$LAB/etc/jwt_hs256.key"

  local last_port=$((NODE_PORT0 + 3))
  cat > "$LAB/etc/slurm.conf" <<CONF
ClusterName=$CLUSTER
SlurmctldHost=localhost
SlurmctldPort=$CTLD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/none
CredType=cred/none
AuthAltTypes=auth/jwt
AuthAltParameters=jwt_key=$IN/etc/jwt_hs256.key
StateSaveLocation=$IN/state
SlurmdSpoolDir=$IN/spool/%n
SlurmctldPidFile=$IN/run/slurmctld.pid
SlurmdPidFile=$IN/run/slurmd-%n.pid
SlurmctldLogFile=$IN/log/slurmctld.log
SlurmdLogFile=$IN/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
$EXTRA
SlurmdParameters=config_overrides
ReturnToService=2
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=4096
PriorityType=priority/basic
GresTypes=gpu
TopologyPlugin=topology/tree
SlurmctldTimeout=30
SlurmdTimeout=60
InactiveLimit=0
KillWait=5
MinJobAge=600
NodeName=gpu[01-04] NodeHostname=localhost NodeAddr=127.0.0.1 Port=$NODE_PORT0-$last_port Sockets=2 CoresPerSocket=16 ThreadsPerCore=1 RealMemory=512000 Gres=gpu:h100:8 State=UNKNOWN
PartitionName=gpu Nodes=gpu[01-04] Default=YES MaxTime=INFINITE State=UP
PartitionName=pair Nodes=gpu[03-04] MaxTime=INFINITE State=UP
CONF
  # Two leaf switches under a spine (scontrol show topology; nightshift's
  # failure domains). Letter ranges are refused: names listed.
  cat > "$LAB/etc/topology.conf" <<CONF
SwitchName=leaf-a Nodes=gpu[01-02]
SwitchName=leaf-b Nodes=gpu[03-04]
SwitchName=spine-0 Switches=leaf-a,leaf-b
CONF
  cat > "$LAB/etc/gres.conf" <<CONF
AutoDetect=off
NodeName=gpu[01-04] Name=gpu Type=h100 File=$IN/dev/nvidia[0-7]
CONF
}

stop_daemons() {
  local f pid
  for f in "$1"/run/slurmrestd.pid "$1"/run/slurmd-*.pid "$1"/run/slurmctld.pid; do
    [ -f "$f" ] || continue
    pid=$(cat "$f")
    kill "$pid" 2>/dev/null
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
    kill -9 "$pid" 2>/dev/null
  done
}
