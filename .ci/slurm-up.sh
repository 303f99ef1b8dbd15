#!/usr/bin/env bash
# Start a single-node SLURM cluster (munged + slurmctld + slurmd) on 127.0.0.1, for the tests and CI.
# Idempotent: when the cluster in $OODCORR_SLURM_DIR already answers, it only prints its SLURM_CONF line.
# No cgroups (proctrack/linuxproc, task/none), no accounting; every file lives under $OODCORR_SLURM_DIR.
# On success prints `SLURM_CONF=<dir>/slurm.conf` (export it to use the cluster) and exits 0; otherwise prints
# one line `slurm unavailable: <reason>` and exits 1.
# Needs Debian's slurm-wlm and munge (`apt-get install -y slurm-wlm munge`) and root (slurmd runs jobs as
# the submitting user). `.ci/slurm-up.sh --down` stops it.
set -uo pipefail
DIR="${OODCORR_SLURM_DIR:-/tmp/oodcorr-slurm}"
CTLD_PORT="${OODCORR_SLURMCTLD_PORT:-16817}"
SLURMD_PORT="${OODCORR_SLURMD_PORT:-16818}"
CONF="$DIR/slurm.conf"
fail() { echo "slurm unavailable: $*"; exit 1; }
export SLURM_CONF="$CONF"

stop() {
  for p in slurmd slurmctld munged; do
    if [[ -f "$DIR/$p.pid" ]]; then
      pid=$(cat "$DIR/$p.pid" 2>/dev/null)
      if [[ -n "$pid" ]] && kill "$pid" 2>/dev/null; then
        for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
      fi
      rm -f "$DIR/$p.pid"
    fi
  done
}
if [[ "${1:-}" == "--down" ]]; then stop; echo "slurm stopped ($DIR)"; exit 0; fi

up() { scontrol ping 2>/dev/null | grep -q "is UP" && sinfo -h -o %t 2>/dev/null | grep -qE "^(idle|mix|alloc)"; }

for tool in munged mungekey slurmctld slurmd scontrol sinfo sbatch; do
  command -v "$tool" >/dev/null 2>&1 || [[ -x "/usr/sbin/$tool" ]] || \
    fail "$tool not found (install Debian's slurm-wlm and munge: apt-get install -y slurm-wlm munge)"
done
export PATH="$PATH:/usr/sbin"
[[ "$(id -u)" == 0 ]] || fail "needs root (slurmd starts jobs as the submitting user); point at an existing cluster instead"
mkdir -p "$DIR"/{spool/ctld,spool/d,log,munge} || fail "cannot create $DIR"
chmod 700 "$DIR/munge"

HOST=$(hostname -s)
addr=$(getent hosts "$HOST" | awk '{print $1; exit}')
[[ -n "$addr" ]] || fail "hostname $HOST does not resolve (add '127.0.0.1 $HOST' to /etc/hosts)"
[[ "$addr" == 127.* ]] || fail "hostname $HOST resolves to $addr, not a loopback address; this helper only binds to 127.0.0.1"
read -r CPUS MEM < <(slurmd -C 2>/dev/null | awk '{for(i=1;i<=NF;i++){split($i,a,"="); if(a[1]=="CPUs")c=a[2]; if(a[1]=="RealMemory")m=a[2]}} END{print c, m}')
[[ -n "${CPUS:-}" && -n "${MEM:-}" ]] || fail "slurmd -C cannot read this machine's CPUs/memory"
MEM=$(( MEM * 9 / 10 ))

cat > "$CONF.new" <<CONF
# written by .ci/slurm-up.sh: single node on 127.0.0.1, no cgroups, no accounting
ClusterName=oodcorr
SlurmctldHost=$HOST($addr)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
CommunicationParameters=NoCtldInAddrAny,NoInAddrAny
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$DIR/munge/munge.socket,cred_expire=10
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$DIR/spool/ctld
SlurmdSpoolDir=$DIR/spool/d
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SwitchType=switch/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
SlurmctldTimeout=30
SlurmdTimeout=60
InactiveLimit=0
KillWait=5
MinJobAge=600
MaxArraySize=10001
NodeName=$HOST NodeAddr=$addr CPUs=$CPUS RealMemory=$MEM State=UNKNOWN
PartitionName=debug Nodes=$HOST Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
CONF
# already running with this configuration: nothing to do
if [[ -f "$CONF" ]] && cmp -s "$CONF" "$CONF.new" && up; then rm -f "$CONF.new"; echo "SLURM_CONF=$CONF"; exit 0; fi
stop
mv "$CONF.new" "$CONF"

# munge: private key and socket (leaves any system munged alone)
[[ -f "$DIR/munge/munge.key" ]] || mungekey --create --keyfile="$DIR/munge/munge.key" >/dev/null 2>&1 || \
  dd if=/dev/urandom of="$DIR/munge/munge.key" bs=1024 count=1 status=none || fail "cannot create a munge key"
chmod 400 "$DIR/munge/munge.key"
munged --force --key-file="$DIR/munge/munge.key" --socket="$DIR/munge/munge.socket" \
  --pid-file="$DIR/munged.pid" --log-file="$DIR/log/munged.log" --seed-file="$DIR/munge/munge.seed" \
  >"$DIR/log/munged.out" 2>&1 || fail "munged did not start: $(tail -n1 "$DIR/log/munged.out" "$DIR/log/munged.log" 2>/dev/null | grep -v '^==' | grep . | tail -n1)"


slurmctld -i >"$DIR/log/slurmctld.out" 2>&1 || fail "slurmctld did not start: $(tail -n1 "$DIR/log/slurmctld.log" 2>/dev/null)"
slurmd >"$DIR/log/slurmd.out" 2>&1 || fail "slurmd did not start: $(tail -n1 "$DIR/log/slurmd.log" 2>/dev/null)"
for _ in $(seq 1 60); do
  if up; then echo "SLURM_CONF=$CONF"; exit 0; fi
  sleep 0.5
done
state=$(sinfo -h -o "%t %E" 2>/dev/null | head -n1)
fail "cluster did not become ready within 30 s (node: ${state:-no answer}; logs in $DIR/log)"
