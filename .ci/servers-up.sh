#!/usr/bin/env bash
# Start the two remote servers the sharing tests use, both on 127.0.0.1 only:
#  - an OpenSSH server (its own sshd_config and host key, key-only login for the user oodcorr-remote, a free port).
#    Its storage is a tmpfs mounted inside sshd's own mount namespace (unshare -m --propagation private), so the
#    folder the remote URL names is EMPTY for every process outside it: a client that reads the remote as a local
#    path sees nothing there. Needs root (the namespace, the user) and Debian's openssh-server.
#  - an S3-compatible server: moto's server mode, with authentication on (an IAM user and its access key are created,
#    then every request must be signed with that key: a wrong key or secret is refused). Needs moto[server], boto3.
# Prints KEY=VALUE lines on stdout (export them: the tests read OODCORR_SSH_* and OODCORR_S3_*); a server that cannot
# start prints one line `ssh unavailable: <reason>` (or s3) on stderr and OODCORR_SSH_UNAVAILABLE=<reason> on stdout,
# so its tests skip with that reason. Exits 0 even then: CI never fails because a server could not start.
# Every file lives under $OODCORR_SERVERS_DIR (default /tmp/oodcorr-servers). Idempotent: a server that already
# answers is kept. `--down` stops both; `--ssh-stop` stops sshd only (its storage is kept: the next call starts it
# again on the same port, the tests' "server down" case).
set -uo pipefail
DIR="${OODCORR_SERVERS_DIR:-/tmp/oodcorr-servers}"
HERE="$(cd "$(dirname "$0")" && pwd)"
PY="${OODCORR_SERVERS_PYTHON:-$HERE/../.venv/bin/python}"
[[ -x "$PY" ]] || PY=python3
SSH_USER=oodcorr-remote
SSHD=$(command -v sshd || echo /usr/sbin/sshd)
export PATH="$PATH:/usr/sbin" AWS_EC2_METADATA_DISABLED=true

killpid() {  # killpid FILE: stop the process whose pid FILE holds, wait for it, remove FILE
  local pid
  pid=$(cat "$1" 2>/dev/null) || return 0
  if [[ -n "$pid" ]] && kill "$pid" 2>/dev/null; then
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null
  fi
  rm -f "$1"
}
free_port() { "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
alive() { [[ -f "$1" ]] && kill -0 "$(cat "$1")" 2>/dev/null; }

case "${1:-}" in
  --down) killpid "$DIR/ssh/sshd.pid"; killpid "$DIR/ssh/holder.pid"; killpid "$DIR/s3/moto.pid"
          echo "servers stopped ($DIR)" >&2; exit 0 ;;
  --ssh-stop) killpid "$DIR/ssh/sshd.pid"; exit 0 ;;
esac

ssh_ok() {  # a key login through the server's own host key, and the storage folder writable there
  ssh -q -i "$DIR/ssh/client_ed25519" -o UserKnownHostsFile="$DIR/ssh/known_hosts" -o StrictHostKeyChecking=yes \
    -o BatchMode=yes -o ConnectTimeout=3 -o IdentitiesOnly=yes -p "$(cat "$DIR/ssh/port")" \
    "$SSH_USER@127.0.0.1" "test -w '$DIR/ssh/storage'" 2>/dev/null
}

ssh_up() {
  local d="$DIR/ssh" store="$DIR/ssh/storage" port uid gid
  [[ -x "$SSHD" ]] || { echo "sshd not found (apt-get install -y openssh-server)"; return 1; }
  command -v ssh >/dev/null && command -v ssh-keygen >/dev/null || { echo "ssh/ssh-keygen not found (apt-get install -y openssh-client)"; return 1; }
  command -v unshare >/dev/null && command -v nsenter >/dev/null || { echo "unshare/nsenter not found (util-linux)"; return 1; }
  [[ "$(id -u)" == 0 ]] || { echo "needs root (sshd in its own mount namespace, a login user of its own)"; return 1; }
  if alive "$d/sshd.pid" && ssh_ok; then return 0; fi
  mkdir -p "$d" "$store" /run/sshd && chmod 755 "$DIR" "$d" || { echo "cannot create $d"; return 1; }
  if ! id "$SSH_USER" >/dev/null 2>&1; then
    useradd --system --no-create-home --home-dir "$store" --shell /bin/sh "$SSH_USER" 2>/dev/null || \
      { echo "cannot create the login user $SSH_USER (useradd)"; return 1; }
  fi
  usermod -p '*' "$SSH_USER" 2>/dev/null  # no password, but not "locked": sshd refuses locked accounts even for keys
  uid=$(id -u "$SSH_USER"); gid=$(id -g "$SSH_USER")
  [[ -f "$d/host_ed25519" ]] || ssh-keygen -q -t ed25519 -N '' -C oodcorr-test-host -f "$d/host_ed25519" || { echo "ssh-keygen failed"; return 1; }
  [[ -f "$d/client_ed25519" ]] || ssh-keygen -q -t ed25519 -N '' -C oodcorr-test-client -f "$d/client_ed25519" || { echo "ssh-keygen failed"; return 1; }
  cp "$d/client_ed25519.pub" "$d/authorized_keys" && chmod 644 "$d/authorized_keys"
  # the namespace holder: a process that keeps the private mount (and the data on it) while sshd restarts
  if ! alive "$d/holder.pid"; then
    setsid unshare -m --propagation private sleep infinity </dev/null >/dev/null 2>&1 &
    echo $! > "$d/holder.pid"
    sleep 0.2
    alive "$d/holder.pid" || { echo "unshare -m failed (no mount namespaces here?)"; return 1; }
    nsenter -t "$(cat "$d/holder.pid")" -m mount -t tmpfs -o "size=1g,mode=0700,uid=$uid,gid=$gid" oodcorr-ssh "$store" \
      || { echo "cannot mount a private tmpfs at $store"; killpid "$d/holder.pid"; return 1; }
  fi
  [[ -f "$d/port" ]] || free_port > "$d/port"
  port=$(cat "$d/port")
  echo "[127.0.0.1]:$port $(cut -d' ' -f1,2 "$d/host_ed25519.pub")" > "$d/known_hosts"
  cat > "$d/sshd_config" <<CONF
# written by .ci/servers-up.sh: 127.0.0.1 only, key login only, one user
Port $port
ListenAddress 127.0.0.1
HostKey $d/host_ed25519
PidFile $d/sshd.pid
AuthorizedKeysFile $d/authorized_keys
AuthenticationMethods publickey
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin no
AllowUsers $SSH_USER
UsePAM no
StrictModes no
X11Forwarding no
AllowTcpForwarding no
AllowAgentForwarding no
MaxSessions 32
MaxStartups 64:30:128
Subsystem sftp internal-sftp
CONF
  nsenter -t "$(cat "$d/holder.pid")" -m "$SSHD" -f "$d/sshd_config" -E "$d/sshd.log" || \
    { echo "sshd did not start: $(tail -n1 "$d/sshd.log" 2>/dev/null)"; return 1; }
  for _ in $(seq 1 50); do ssh_ok && break; sleep 0.1; done
  ssh_ok || { echo "sshd started but a key login failed ($(tail -n1 "$d/sshd.log" 2>/dev/null))"; return 1; }
  # the point of the namespace: the storage is not readable here
  if mountpoint -q "$store" || [[ -n "$(ls -A "$store")" ]]; then echo "the storage $store is visible outside sshd"; return 1; fi
}

s3_up() {
  local d="$DIR/s3" port
  "$PY" -c "import moto.server, boto3, flask_cors" 2>/dev/null || { echo "moto[server] not installed (pip install 'moto[server]')"; return 1; }
  mkdir -p "$d" || { echo "cannot create $d"; return 1; }
  if alive "$d/moto.pid" && [[ -f "$d/credentials" ]] && "$PY" "$HERE/moto_setup.py" check "$d"; then return 0; fi
  killpid "$d/moto.pid"
  port=$(free_port)
  echo "http://127.0.0.1:$port" > "$d/endpoint"
  setsid "$PY" -m moto.server -H 127.0.0.1 -p "$port" </dev/null >"$d/moto.log" 2>&1 &
  echo $! > "$d/moto.pid"
  "$PY" "$HERE/moto_setup.py" setup "$d" || { echo "moto did not come up: $(tail -n1 "$d/moto.log" 2>/dev/null)"; killpid "$d/moto.pid"; return 1; }
}

if reason=$(ssh_up); then
  d="$DIR/ssh"
  echo "OODCORR_SSH_URL=ssh://$SSH_USER@127.0.0.1:$(cat "$d/port")$d/storage"
  echo "OODCORR_SSH_KEY=$d/client_ed25519"
  echo "OODCORR_SSH_KNOWN_HOSTS=$d/known_hosts"
else
  echo "ssh unavailable: ${reason##*$'\n'}" >&2; echo "OODCORR_SSH_UNAVAILABLE=${reason##*$'\n'}"
fi
if reason=$(s3_up); then
  echo "OODCORR_S3_ENDPOINT=$(cat "$DIR/s3/endpoint")"
  echo "OODCORR_S3_BUCKET=oodcorr-studies"
  echo "OODCORR_S3_CREDENTIALS=$DIR/s3/credentials"
else
  echo "s3 unavailable: ${reason##*$'\n'}" >&2; echo "OODCORR_S3_UNAVAILABLE=${reason##*$'\n'}"
fi
echo "OODCORR_SERVERS_DIR=$DIR"
exit 0
