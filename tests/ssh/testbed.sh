#!/usr/bin/env bash
# hpcjobs SSH testbed: Debian 12's OpenSSH server on 127.0.0.1, its own port, host key and config, in
# front of the Slurm and OpenPBS testbeds, for submission "from a laptop" over one SSH connection.
#
# Usage (as root):  bash tests/ssh/testbed.sh {start|stop|status|env}
#
#   start   apt-get install openssh-server/openssh-client when missing (and stop the sshd on port 22 that
#           Debian's postinst starts, when it was this script that installed the package); create the
#           login user (key-only, no password); write the host key, the client key, known_hosts, an
#           ssh_config and sshd_config under $STATE; start sshd; check one `ssh ... true` round trip.
#           Idempotent: a running testbed is left as it is.
#   stop    stop this testbed's sshd (its pid file only: never an sshd it did not start)
#   status  exit 0 when `ssh -F $STATE/client/ssh_config hpcjobs-ssh-testbed true` works, else 1
#   env     print the client's settings as shell assignments (HPCJOBS_SSH_CONFIG=..., ...)
#
# The client side is for the tests: ssh -F "$STATE/client/ssh_config" hpcjobs-ssh-testbed CMD
# (BatchMode, the key only, known_hosts checked strictly, so a changed host key is refused).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
readonly STATE=/var/lib/hpcjobs-testbed/ssh          # removed by the fresh-machine drill with the other state
readonly LOGDIR=/var/log/hpcjobs-testbed
readonly PORT=${HPCJOBS_SSH_TESTBED_PORT:-2222}
readonly LOGIN_USER=${HPCJOBS_SSH_TESTBED_USER:-hpcssh}
readonly HOST_ALIAS=hpcjobs-ssh-testbed
readonly TIMEOUT=${TESTBED_TIMEOUT:-60}

T0=${EPOCHREALTIME/[.,]/}
elapsed() { local now=${EPOCHREALTIME/[.,]/}; printf '%d.%d' $(( (now - T0) / 1000000 )) $(( (now - T0) / 100000 % 10 )); }
log() { printf '[ssh-testbed %6ss] %s\n' "$(elapsed)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }
need_root() { [[ $(id -u) -eq 0 ]] || die "must run as root (sudo bash $0 $1)"; }
# shellcheck source=tests/testbed_lib.sh
. "$HERE/../testbed_lib.sh"

client_ssh() {  # client_ssh ARGS...: the tests' ssh, with the testbed's client config
    ssh -F "$STATE/client/ssh_config" "$@"
}

answers() {
    [[ -f $STATE/client/ssh_config ]] && timeout 20 ssh -F "$STATE/client/ssh_config" "$HOST_ALIAS" true 2>/dev/null
}

running_pid() {  # the pid of this testbed's sshd, when it runs
    local pid
    [[ -f $STATE/sshd.pid ]] || return 1
    pid=$(<"$STATE/sshd.pid")
    [[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null && [[ $(cat "/proc/$pid/comm" 2>/dev/null) == sshd ]] \
        && echo "$pid"
}

install_packages() {
    local had_server=0
    dpkg-query -W -f='${Status}' openssh-server 2>/dev/null | grep -q 'install ok installed' && had_server=1
    apt_need openssh-server openssh-client
    if ((!had_server)) && [[ -x /etc/init.d/ssh ]]; then
        # Debian's postinst starts the machine's own sshd on port 22 where it can: not this testbed's to keep
        /etc/init.d/ssh stop >/dev/null 2>&1 || true
        log "stopped the sshd on port 22 that installing openssh-server started"
    fi
}

make_user() {
    if ! id "$LOGIN_USER" >/dev/null 2>&1; then
        useradd --create-home --shell /bin/bash "$LOGIN_USER"
        log "created user $LOGIN_USER (no password: key-only logins)"
    fi
    # "*": no password can match, and the account is not locked ("!", useradd's default), which sshd
    # without PAM refuses even for keys ("User ... not allowed because account is locked")
    usermod -p '*' "$LOGIN_USER"
}

write_files() {
    install -d -m 0755 "$STATE" "$STATE/authorized" "$LOGDIR" /run/sshd
    install -d -m 0700 "$STATE/client"
    [[ -f $STATE/host_ed25519_key ]] || ssh-keygen -q -t ed25519 -N '' -C "$HOST_ALIAS host" -f "$STATE/host_ed25519_key"
    [[ -f $STATE/client/id_ed25519 ]] || ssh-keygen -q -t ed25519 -N '' -C "hpcjobs tests" -f "$STATE/client/id_ed25519"
    # sshd's StrictModes: the key file and every folder above it owned by root, not group/world-writable
    install -m 0644 "$STATE/client/id_ed25519.pub" "$STATE/authorized/$LOGIN_USER"
    printf '[127.0.0.1]:%s %s\n' "$PORT" "$(cut -d' ' -f1,2 "$STATE/host_ed25519_key.pub")" >"$STATE/client/known_hosts"
    cat >"$STATE/sshd_config" <<CONF
# Written by hpcjobs tests/ssh/testbed.sh: the SSH testbed's own sshd, beside any the machine has.
Port $PORT
ListenAddress 127.0.0.1
HostKey $STATE/host_ed25519_key
PidFile $STATE/sshd.pid
AuthorizedKeysFile $STATE/authorized/%u
AllowUsers $LOGIN_USER
PermitRootLogin no
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes yes
PrintMotd no
# the kill-the-connection trials open many connections in a row
MaxStartups 100:30:200
MaxSessions 50
LogLevel VERBOSE
Subsystem sftp internal-sftp
CONF
    cat >"$STATE/client/ssh_config" <<CONF
# Written by hpcjobs tests/ssh/testbed.sh: how the tests reach the SSH testbed.
Host $HOST_ALIAS
    HostName 127.0.0.1
    Port $PORT
    User $LOGIN_USER
    IdentityFile $STATE/client/id_ed25519
    IdentitiesOnly yes
    UserKnownHostsFile $STATE/client/known_hosts
    GlobalKnownHostsFile /dev/null
    StrictHostKeyChecking yes
    BatchMode yes
    ConnectTimeout 10
CONF
}

start() {
    need_root start
    if running_pid >/dev/null && answers; then
        log "already running (pid $(running_pid)) on 127.0.0.1:$PORT"
        return 0
    fi
    install_packages
    make_user
    write_files
    /usr/sbin/sshd -t -f "$STATE/sshd_config" || die "sshd -t refused $STATE/sshd_config"
    /usr/sbin/sshd -f "$STATE/sshd_config" -E "$LOGDIR/sshd.log" || die "sshd did not start (see $LOGDIR/sshd.log)"
    local deadline=$((SECONDS + TIMEOUT))
    until answers; do
        ((SECONDS < deadline)) || die "no ssh round trip to $LOGIN_USER@127.0.0.1:$PORT after ${TIMEOUT}s (see $LOGDIR/sshd.log)"
        sleep 0.2
    done
    log "up: sshd (pid $(running_pid)) on 127.0.0.1:$PORT, user $LOGIN_USER; ssh -F $STATE/client/ssh_config $HOST_ALIAS"
}

stop() {
    local pid
    if pid=$(running_pid); then
        kill "$pid"
        log "stopped sshd (pid $pid)"
    else
        log "not running"
    fi
}

status() {
    if answers; then
        # shellcheck disable=SC2016  # expanded on the remote side
        log "running: $(client_ssh "$HOST_ALIAS" 'echo "$(id -un)@$(hostname)"; ssh -V 2>&1')"
        return 0
    fi
    log "not answering"
    return 1
}

case ${1:-} in
    start) start ;;
    stop) stop ;;
    status) status ;;
    env) printf 'HPCJOBS_SSH_CONFIG=%q\nHPCJOBS_SSH_HOST=%q\nHPCJOBS_SSH_USER=%q\n' \
             "$STATE/client/ssh_config" "$HOST_ALIAS" "$LOGIN_USER" ;;
    *) echo "usage: $0 {start|stop|status|env}" >&2; exit 2 ;;
esac
