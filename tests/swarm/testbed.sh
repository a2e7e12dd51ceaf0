#!/usr/bin/env bash
# hpcjobs one-node Docker Swarm testbed (Debian 12: docker.io 20.10, no registry needed).
#
# Usage (as root):  bash tests/swarm/testbed.sh {start|stop|status|dockerd|image}
#
#   dockerd  install docker.io when missing and start dockerd in the background with its own data root,
#            PID file and log (the daemon the Kubernetes testbed's kubelet uses too). Idempotent.
#   image    dockerd, then the job image (the Kubernetes testbed's jobs run it too). Idempotent.
#   start    dockerd, then `docker swarm init --advertise-addr 127.0.0.1`, import the job image and
#            run a smoke replicated-job service (3 tasks) until every task is Complete. Idempotent:
#            about a second when already up. Also makes the attachable overlay network $NETWORK
#            (hpcjobs-testbed-net) that the tasks of a multi-node job share.
#   stop     remove the services hpcjobs made (label hpcjobs.tag), leave the swarm, stop the dockerd
#            this script started (by its recorded PID). A daemon it did not start is left alone.
#   status   the swarm node and the image; exit 0 when healthy, else 1
#
# The job image (hpcjobs-testbed/hostfs:1, see tests/swarm/README.md) is an empty root made with
# `docker import` (no registry is reachable from CI): jobs see the host's /usr and /etc read-only
# through the bind mounts of the site file site-configs/swarm-testbed.yaml, so they run the host's bash,
# coreutils and Python. The daemon listens on the default socket (/var/run/docker.sock) so that the
# plain `docker` CLI, hence hpcjobs, finds it without DOCKER_HOST.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
readonly STATE=${HPCJOBS_TESTBED_DIR:-/var/lib/hpcjobs-testbed}/docker
readonly LOGDIR=${HPCJOBS_TESTBED_LOG:-/var/log/hpcjobs-testbed}
readonly PIDFILE=$STATE/dockerd.pid
readonly SOCKET=/var/run/docker.sock
readonly IMAGE=${HPCJOBS_SWARM_IMAGE:-hpcjobs-testbed/hostfs:1}
readonly TIMEOUT=${TESTBED_TIMEOUT:-90}
# The attachable overlay network the tasks of a distributed (multi-node) job share (tests/sites/swarm-dist.yaml)
readonly NETWORK=${HPCJOBS_SWARM_NETWORK:-hpcjobs-testbed-net}
export DEBIAN_FRONTEND=noninteractive
# Debian's client first: it matches the daemon (a newer client on PATH also works, it negotiates the API)
DOCKER=/usr/bin/docker

T0=${EPOCHREALTIME/[.,]/}
elapsed() { local now=${EPOCHREALTIME/[.,]/}; printf '%d.%d' $(( (now - T0) / 1000000 )) $(( (now - T0) / 100000 % 10 )); }
log() { printf '[swarm-testbed %5ss] %s\n' "$(elapsed)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }
need_root() { [[ $(id -u) -eq 0 ]] || die "must run as root (sudo bash $0 $1)"; }

# shellcheck source=tests/testbed_lib.sh
. "$HERE/../testbed_lib.sh"

daemon_up() { "$DOCKER" info --format '{{.ServerVersion}}' >/dev/null 2>&1; }
ours() { [[ -f $PIDFILE ]] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null; }

wait_for() {  # wait_for SECONDS DESCRIPTION COMMAND...
    local limit=$1 what=$2; shift 2
    local deadline=$(( SECONDS + limit ))
    until "$@" >/dev/null 2>&1; do
        (( SECONDS < deadline )) || return 1
        sleep 0.2
    done
    log "$what"
}

write_daemon_config() {
    # The runc wrapper clamps a negative oomScoreAdj, which a container without CAP_SYS_RESOURCE (this
    # machine kind) cannot set: the kubelet asks -998 for its pause containers. Harmless for Swarm tasks.
    install -m 0755 "$HERE/runc-nooomadj" "$STATE/runc-nooomadj"
    cat >"$STATE/daemon.json.new" <<JSON
{
  "data-root": "$STATE/data",
  "exec-root": "/run/hpcjobs-docker",
  "pidfile": "$PIDFILE",
  "hosts": ["unix://$SOCKET"],
  "runtimes": {"runc-nooomadj": {"path": "$STATE/runc-nooomadj"}},
  "default-runtime": "runc-nooomadj",
  "log-driver": "json-file",
  "log-opts": {"max-size": "10m", "max-file": "2"},
  "iptables": true
}
JSON
    mv "$STATE/daemon.json.new" "$STATE/daemon.json"
}

start_dockerd() {
    need_root dockerd
    apt_need docker.io iptables busybox-static jq
    if daemon_up; then
        ours || [[ ${HPCJOBS_SWARM_USE_RUNNING:-0} == 1 ]] \
            || die "a Docker daemon this script did not start answers on $SOCKET; stop it, or set HPCJOBS_SWARM_USE_RUNNING=1 to use it"
        return 0
    fi
    mkdir -p "$STATE" "$LOGDIR"
    write_daemon_config
    log "starting dockerd (data root $STATE/data, log $LOGDIR/dockerd.log)"
    # setsid: the daemon outlives this script and the shell that ran it
    setsid /usr/sbin/dockerd --config-file "$STATE/daemon.json" >>"$LOGDIR/dockerd.log" 2>&1 </dev/null &
    wait_for "$TIMEOUT" "dockerd answers" daemon_up \
        || { tail -20 "$LOGDIR/dockerd.log" >&2; die "dockerd did not answer in ${TIMEOUT}s"; }
}

swarm_active() { [[ $("$DOCKER" info --format '{{.Swarm.LocalNodeState}}/{{.Swarm.ControlAvailable}}' 2>/dev/null) == active/true ]]; }

import_image() {
    "$DOCKER" image inspect "$IMAGE" >/dev/null 2>&1 && return 0
    # An empty root with Debian's merged-/usr links and the mount points the site file binds.
    local root
    root=$(mktemp -d)
    # /sbin stays a directory: `--init` mounts docker-init at /sbin/docker-init, which must not land in
    # the read-only /usr the site file binds
    mkdir -p "$root"/{usr,etc,tmp,var/tmp,proc,sys,dev,run,root,home,sbin}
    chmod 1777 "$root/tmp" "$root/var/tmp"
    ln -s usr/bin "$root/bin"; ln -s usr/lib "$root/lib"; ln -s usr/lib64 "$root/lib64"
    tar -C "$root" -c . | "$DOCKER" import -c 'ENV PATH=/usr/local/bin:/usr/bin:/bin' -m 'hpcjobs testbed: host /usr and /etc are bind-mounted' - "$IMAGE" >/dev/null
    rm -rf "$root"
    log "imported $IMAGE"
}

smoke() {
    local name=hpcjobs-testbed-smoke out
    "$DOCKER" service rm "$name" >/dev/null 2>&1 || true
    # shellcheck disable=SC2016  # $SLOT is the task's, expanded by its shell
    "$DOCKER" service create --detach --quiet --name "$name" --mode replicated-job --replicas 3 --max-concurrent 3 \
        --restart-condition none --no-resolve-image --endpoint-mode dnsrr \
        --mount type=bind,source=/usr,target=/usr,readonly --mount type=bind,source=/etc,target=/etc,readonly \
        --env 'SLOT={{.Task.Slot}}' "$IMAGE" /bin/sh -c 'echo "slot=$SLOT"' >/dev/null \
        || die "the smoke service was refused"
    local deadline=$(( SECONDS + TIMEOUT ))
    until [[ $("$DOCKER" service ps "$name" --format '{{.CurrentState}}' | grep -c '^Complete') == 3 ]]; do
        if "$DOCKER" service ps "$name" --format '{{.CurrentState}}' | grep -Eq '^(Failed|Rejected)'; then
            "$DOCKER" service ps --no-trunc "$name" >&2
            die "a smoke task failed"
        fi
        (( SECONDS < deadline )) || { "$DOCKER" service ps --no-trunc "$name" >&2; die "smoke tasks not complete after ${TIMEOUT}s"; }
        sleep 0.2
    done
    out=$("$DOCKER" service logs --raw "$name" 2>/dev/null | sort | tr '\n' ' ')
    "$DOCKER" service rm "$name" >/dev/null
    log "smoke replicated job: 3/3 tasks complete ($out)"
}

ensure_network() {  # the attachable overlay network, made once
    if ! "$DOCKER" network inspect "$NETWORK" >/dev/null 2>&1; then
        "$DOCKER" network create --driver overlay --attachable "$NETWORK" >/dev/null || die "cannot create network $NETWORK"
        log "overlay network $NETWORK created"
    fi
}

start() {
    need_root start
    if daemon_up && swarm_active && "$DOCKER" image inspect "$IMAGE" >/dev/null 2>&1 && [[ -f $STATE/.smoke-ok ]]; then
        ensure_network
        log "already up: swarm node $("$DOCKER" info --format '{{.Swarm.NodeID}}'), image $IMAGE, network $NETWORK"
        return 0
    fi
    start_dockerd
    if ! swarm_active; then
        "$DOCKER" swarm init --advertise-addr 127.0.0.1 >/dev/null || die "docker swarm init failed"
        log "swarm initialised (node $("$DOCKER" info --format '{{.Swarm.NodeID}}'))"
    fi
    import_image
    ensure_network
    smoke
    touch "$STATE/.smoke-ok"
    log "up: Docker $("$DOCKER" version --format '{{.Server.Version}}'), swarm manager 127.0.0.1, image $IMAGE"
}

stop() {
    need_root stop
    rm -f "$STATE/.smoke-ok"
    if daemon_up; then
        local ids=()
        mapfile -t ids < <("$DOCKER" service ls -q --filter label=hpcjobs.tag 2>/dev/null || true)
        if ((${#ids[@]})); then
            # scale first: `docker service rm` of a job leaves its running tasks running (github.com/moby/moby/issues/42789)
            "$DOCKER" service scale --detach "${ids[@]/%/=0}" >/dev/null 2>&1 || true
            sleep 2
            "$DOCKER" service rm "${ids[@]}" >/dev/null 2>&1 || true
        fi
    fi
    if ours; then
        if swarm_active; then "$DOCKER" swarm leave --force >/dev/null 2>&1 || true; fi
        local pid
        pid=$(cat "$PIDFILE")
        kill "$pid"
        local deadline=$(( SECONDS + 30 ))
        while kill -0 "$pid" 2>/dev/null && (( SECONDS < deadline )); do sleep 0.2; done
        log "stopped dockerd (pid $pid)"
    else
        log "no dockerd started by this script is running"
    fi
}

status() {
    if daemon_up && swarm_active && "$DOCKER" image inspect "$IMAGE" >/dev/null 2>&1; then
        "$DOCKER" node ls
        echo "image $IMAGE, Docker $("$DOCKER" version --format '{{.Server.Version}}')"
        return 0
    fi
    echo "Swarm testbed is not healthy (dockerd up: $(daemon_up && echo yes || echo no), swarm active: $(swarm_active && echo yes || echo no))" >&2
    return 1
}

case ${1:-} in
    start) start ;;
    stop) stop ;;
    status) status ;;
    dockerd) start_dockerd ;;
    image) start_dockerd; import_image ;;
    *) echo "usage: $0 {start|stop|status|dockerd|image}" >&2; exit 2 ;;
esac
