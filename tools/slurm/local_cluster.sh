#!/bin/bash
# A one-node Slurm cluster on this machine, for trying the recipe and for host/tests/slurm.rs:
#   tools/slurm/local_cluster.sh start DIR    # munged, slurmctld and slurmd, state under DIR
#   export SLURM_CONF=DIR/slurm.conf          # then sbatch, squeue, ... talk to it
#   tools/slurm/local_cluster.sh stop DIR
# Needs Debian's slurm-wlm and munge (22.05 tested) and root (the daemons run as it). No
# accounting, no cgroups (proctrack/linuxproc, task/none); ports from SLURM_PORT (default
# 16817, and the next one). `start` exits 0 once the node is idle, else 1 with the daemons'
# logs on stderr (and stops them).
set -euo pipefail
what=${1:?usage: local_cluster.sh start|stop DIR}
dir=${2:?usage: local_cluster.sh start|stop DIR}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
stop() {
  for d in slurmd slurmctld munged; do
    [[ -s $dir/$d.pid ]] && kill "$(cat "$dir/$d.pid")" 2>/dev/null || true
  done
  sleep 1
}
if [[ $what == stop ]]; then stop; exit 0; fi
[[ $what == start ]] || { echo "usage: local_cluster.sh start|stop DIR" >&2; exit 2; }
for tool in munged slurmctld slurmd sbatch sinfo; do
  command -v "$tool" >/dev/null || { echo "no $tool (apt-get install slurm-wlm munge)" >&2; exit 1; }
done
(( $(id -u) == 0 )) || { echo "the daemons need root" >&2; exit 1; }
mkdir -p "$dir/munge" "$dir/state" "$dir/spool" "$dir/log"
chmod 700 "$dir/munge"
[[ -s $dir/munge/munge.key ]] || { head -c 1024 /dev/urandom > "$dir/munge/munge.key"; chmod 600 "$dir/munge/munge.key"; }
host=$(hostname -s)
port=${SLURM_PORT:-16817}
cat > "$dir/slurm.conf" <<CONF
ClusterName=dlrmbench
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/munge/socket
CredType=cred/munge
SlurmctldPort=$port
SlurmdPort=$((port + 1))
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MpiDefault=none
SwitchType=switch/none
NodeName=$host NodeAddr=127.0.0.1 CPUs=$(nproc) State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
CONF
export SLURM_CONF=$dir/slurm.conf
munged -F -f --socket="$dir/munge/socket" --key-file="$dir/munge/munge.key" \
  --log-file="$dir/log/munged.log" --pid-file="$dir/munged.pid" --seed-file="$dir/munge/seed" \
  > "$dir/log/munged.out" 2>&1 &
for _ in $(seq 50); do [[ -S $dir/munge/socket ]] && break; sleep 0.1; done
slurmctld -D -i -f "$dir/slurm.conf" > "$dir/log/slurmctld.out" 2>&1 &
sleep 1
slurmd -D -f "$dir/slurm.conf" > "$dir/log/slurmd.out" 2>&1 &
for _ in $(seq 60); do
  if [[ $(sinfo -h -o %T 2>/dev/null) == idle ]]; then exit 0; fi
  sleep 0.5
done
echo "the node did not come up within 30 s:" >&2
tail -n 20 "$dir"/log/* >&2 || true
stop
exit 1
