#!/usr/bin/env bash
# hpcjobs one-node Kubernetes testbed: a real v1.20.2 control plane (etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler) and a kubelet running pods with Docker (dockershim), on
# Debian 12. Kubernetes' server binaries are not packaged in Debian 12: they are built from Debian's
# source package `kubernetes` (1.20.5+really1.20.2), or restored from a cache of that build.
#
# Usage (as root):  bash tests/kubernetes/testbed.sh {start|stop|status|build}
#
#   build    install the four server binaries in $STATE/bin: from a cached build when there is one, else
#            built from Debian's source package (16-20 min on 2 cores, a line a minute), then cached
#   start    build if needed, the Docker daemon and job image (tests/swarm/testbed.sh image), the pause
#            image, then etcd, the API server, the controller manager, the scheduler and the kubelet;
#            waits until the node is Ready and a smoke Job of 2 pods completed. Idempotent: about a
#            second when already up.
#   stop     delete the Jobs hpcjobs made, stop the daemons this script started (by recorded PID) and
#            remove their pods' containers; the Docker daemon stays (the Swarm testbed's)
#   status   the node and the API server's version; exit 0 when healthy, else 1
#
# Where the binaries come from, first match wins:
#   $K8S_BINS_TGZ                                   a tar.xz of the four binaries
#   $K8S_CACHE_DIR/k8s-1.20.2-bins.tar.xz            the cache this script writes (default /var/cache/hpcjobs)
#   ../shared/vendor/kubernetes/k8s-1.20.2-bins.tar.xz beside the checkout, when present (copied to the cache)
#   Debian's source package, built here
#
# Clients use $STATE/kubeconfig (a token user with every right: AlwaysAllow authorization).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
readonly K8S_VERSION=1.20.2
readonly STATE=${HPCJOBS_TESTBED_DIR:-/var/lib/hpcjobs-testbed}/kubernetes
readonly LOGDIR=${HPCJOBS_TESTBED_LOG:-/var/log/hpcjobs-testbed}/kubernetes
readonly BIN=$STATE/bin
readonly RUN=$STATE/run
readonly CACHE_DIR=${K8S_CACHE_DIR:-/var/cache/hpcjobs}
readonly CACHE=$CACHE_DIR/k8s-$K8S_VERSION-bins.tar.xz
readonly PAUSE_IMAGE=k8s.gcr.io/pause:3.2
readonly TIMEOUT=${TESTBED_TIMEOUT:-120}
readonly DAEMONS=(etcd kube-apiserver kube-controller-manager kube-scheduler kubelet)
export DEBIAN_FRONTEND=noninteractive
export KUBECONFIG=$STATE/kubeconfig

T0=${EPOCHREALTIME/[.,]/}
elapsed() { local now=${EPOCHREALTIME/[.,]/}; printf '%d.%d' $(( (now - T0) / 1000000 )) $(( (now - T0) / 100000 % 10 )); }
log() { printf '[k8s-testbed %6ss] %s\n' "$(elapsed)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }
need_root() { [[ $(id -u) -eq 0 ]] || die "must run as root (sudo bash $0 $1)"; }
# shellcheck source=tests/testbed_lib.sh
. "$HERE/../testbed_lib.sh"

wait_for() {  # wait_for SECONDS DESCRIPTION COMMAND...
    local limit=$1 what=$2; shift 2
    local deadline=$(( SECONDS + limit ))
    until "$@" >/dev/null 2>&1; do
        (( SECONDS < deadline )) || return 1
        sleep 0.3
    done
    log "$what"
}

cached_bins() {  # prints the first tarball of the binaries that exists
    local c
    for c in "${K8S_BINS_TGZ:-}" "$CACHE" "$ROOT/../shared/vendor/kubernetes/k8s-$K8S_VERSION-bins.tar.xz"; do
        [[ -n $c && -f $c ]] && { echo "$c"; return 0; }
    done
    return 1
}

fetch_source() {  # the orig tarball of Debian's source package, unpacked in the current folder
    apt-get source --download-only kubernetes >/dev/null
    tar xzf kubernetes_*really${K8S_VERSION}.orig.tar.gz
}

heartbeat() {  # heartbeat PID LOG EXPECTED_S: one line a minute while PID runs (a long build is not a hang)
    local pid=$1 file=$2 expected=$3 t0=$SECONDS
    while kill -0 "$pid" 2>/dev/null; do
        sleep 60 & wait $! || true
        kill -0 "$pid" 2>/dev/null || break
        log "still building: $(( (SECONDS - t0) / 60 )) of about $(( expected / 60 )) min; last line: $(tail -n 1 "$file" 2>/dev/null | cut -c1-100)"
    done
}

build_from_source() {
    # Debian's source package; its vendored reflect2 1.0.1 crashes the API server when built with Go >= 1.18
    # (fatal error: fault ... mapiternext, at the first CustomResourceDefinition): use Debian's reflect2 1.0.2.
    local src=/var/tmp/hpcjobs-k8s-src t0=$SECONDS
    log "no cached build: building Kubernetes $K8S_VERSION from Debian's source package (measured 16-20 min on 2 cores)"
    apt_need golang-go rsync golang-github-modern-go-reflect2-dev dpkg-dev
    mkdir -p "$src" && cd "$src"
    if [[ ! -d kubernetes-$K8S_VERSION ]]; then
        log "apt-get source kubernetes"
        with_deb_src fetch_source
    fi
    cd "kubernetes-$K8S_VERSION"
    rm -rf vendor/github.com/modern-go/reflect2
    cp -r /usr/share/gocode/src/github.com/modern-go/reflect2 vendor/github.com/modern-go/reflect2
    log "make kube-apiserver kube-controller-manager kube-scheduler kubelet (log: $src/make.log)"
    HOME=$src/home GOCACHE=$src/gocache KUBE_GIT_VERSION=v$K8S_VERSION KUBE_GIT_TREE_STATE=clean \
        make WHAT="cmd/kube-apiserver cmd/kube-controller-manager cmd/kube-scheduler cmd/kubelet" GOLDFLAGS="-s -w" \
        >"$src/make.log" 2>&1 &
    local make_pid=$! rc=0
    heartbeat "$make_pid" "$src/make.log" 1100 &
    local beat_pid=$!
    wait "$make_pid" || rc=$?
    kill "$beat_pid" 2>/dev/null || true
    wait "$beat_pid" 2>/dev/null || true
    (( rc == 0 )) || { tail -30 "$src/make.log" >&2; die "the build failed (see $src/make.log)"; }
    mkdir -p "$CACHE_DIR"
    tar -C _output/bin -cJf "$CACHE.tmp" kube-apiserver kube-controller-manager kube-scheduler kubelet
    mv "$CACHE.tmp" "$CACHE"
    log "built in $(( (SECONDS - t0) / 60 )) min $(( (SECONDS - t0) % 60 )) s; cached in $CACHE"
    # the source tree and Go's build cache (several GB) are not needed again: the cache above is
    cd / && rm -rf "$src"
}

build() {
    need_root build
    local b tgz
    for b in kube-apiserver kube-controller-manager kube-scheduler kubelet; do
        [[ -x $BIN/$b ]] || { b=missing; break; }
    done
    [[ $b == missing ]] || return 0
    tgz=$(cached_bins) || { build_from_source; tgz=$CACHE; }
    if [[ $tgz != "$CACHE" && ! -f $CACHE ]]; then  # keep a copy, as the PBS testbed keeps its build
        mkdir -p "$CACHE_DIR" && cp "$tgz" "$CACHE.tmp" && mv "$CACHE.tmp" "$CACHE"
    fi
    mkdir -p "$BIN"
    log "restoring the Kubernetes $K8S_VERSION binaries from $tgz"
    tar -C "$BIN" -xJf "$tgz"
}

deps() {
    apt_need etcd-server jq openssl gcc libc6-dev iproute2 iptables conntrack
    command -v kubectl >/dev/null || apt_need kubernetes-client
    bash "$ROOT/tests/swarm/testbed.sh" image  # dockerd (with the runc wrapper) and the job image
    if ! docker image inspect "$PAUSE_IMAGE" >/dev/null 2>&1; then
        local dir
        dir=$(mktemp -d)
        gcc -static -O2 -o "$dir/pause" "$HERE/pause.c"
        tar -C "$dir" -c pause | docker import -c 'ENTRYPOINT ["/pause"]' - "$PAUSE_IMAGE" >/dev/null
        rm -rf "$dir"
        log "built $PAUSE_IMAGE from tests/kubernetes/pause.c"
    fi
}

pid_of() { [[ -f $RUN/$1.pid ]] && kill -0 "$(cat "$RUN/$1.pid")" 2>/dev/null && cat "$RUN/$1.pid"; }

launch() {  # launch NAME COMMAND...: start a daemon in the background, record its PID
    local name=$1; shift
    setsid "$@" >>"$LOGDIR/$name.log" 2>&1 </dev/null &
    echo $! >"$RUN/$name.pid"
}

node_ip() { ip -4 -o addr show docker0 | awk '{split($4, a, "/"); print a[1]; exit}'; }

node_ready() {
    [[ $(kubectl get nodes -o jsonpath='{.items[0].status.conditions[?(@.type=="Ready")].status}{.items[0].spec.taints}' 2>/dev/null) == True ]]
}

healthy() {
    kubectl get --raw /readyz >/dev/null 2>&1 && node_ready && kubectl get serviceaccount default >/dev/null 2>&1
}

write_config() {
    mkdir -p "$STATE/pki" "$RUN" "$LOGDIR"
    [[ -f $STATE/pki/sa.key ]] || {
        openssl genrsa -out "$STATE/pki/sa.key" 2048 2>/dev/null
        openssl rsa -in "$STATE/pki/sa.key" -pubout -out "$STATE/pki/sa.pub" 2>/dev/null
    }
    [[ -f $STATE/token ]] || { (umask 077; openssl rand -hex 16 >"$STATE/token"); }
    (umask 077; echo "$(cat "$STATE/token"),admin,admin,system:masters" >"$STATE/tokens.csv")
    (umask 077; cat >"$KUBECONFIG" <<KC
apiVersion: v1
kind: Config
clusters: [{name: hpcjobs-testbed, cluster: {server: "https://127.0.0.1:6443", insecure-skip-tls-verify: true}}]
users: [{name: admin, user: {token: $(cat "$STATE/token")}}]
contexts: [{name: hpcjobs-testbed, context: {cluster: hpcjobs-testbed, user: admin, namespace: default}}]
current-context: hpcjobs-testbed
KC
)
}

stop_daemons() {
    local i pid
    for (( i=${#DAEMONS[@]} - 1; i >= 0; i-- )); do
        pid=$(pid_of "${DAEMONS[i]}") || continue
        kill "$pid" 2>/dev/null || true
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$pid" 2>/dev/null || true
    done
    rm -f "$RUN"/*.pid
}

remove_pod_containers() {  # the kubelet leaves its pods' containers and volume mounts behind when it stops
    local ids=() mounts=()
    mapfile -t ids < <(docker ps -aq --filter label=io.kubernetes.pod.name 2>/dev/null || true)
    if ((${#ids[@]})); then docker rm -f "${ids[@]}" >/dev/null 2>&1 || true; fi
    mapfile -t mounts < <(awk -v dir="$RUN/kubelet" '$2 == dir || index($2, dir "/") == 1 {print $2}' /proc/mounts \
        | sort -r)
    if ((${#mounts[@]})); then umount "${mounts[@]}" 2>/dev/null || true; fi
}

smoke_done() { [[ $(kubectl get job hpcjobs-testbed-smoke -o jsonpath='{.status.succeeded}') == 2 ]]; }

smoke() {
    kubectl delete job hpcjobs-testbed-smoke --ignore-not-found --wait=true >/dev/null 2>&1 || true
    kubectl apply -f - >/dev/null <<YAML
apiVersion: batch/v1
kind: Job
metadata: {name: hpcjobs-testbed-smoke}
spec:
  completions: 2
  parallelism: 2
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: smoke
        image: hpcjobs-testbed/hostfs:1
        imagePullPolicy: Never
        command: [/bin/sh, -c, 'echo "pod $(hostname)"']
        volumeMounts: [{name: usr, mountPath: /usr, readOnly: true}]
      volumes: [{name: usr, hostPath: {path: /usr}}]
YAML
    wait_for "$TIMEOUT" "smoke Job: 2/2 pods succeeded" smoke_done \
        || { kubectl describe job hpcjobs-testbed-smoke >&2 || true; die "the smoke Job did not complete in ${TIMEOUT}s"; }
    kubectl delete job hpcjobs-testbed-smoke --wait=false >/dev/null
}

start_failed() {
    (( $1 )) || return 0
    log "start failed (exit $1): stopping the daemons it launched"
    stop_daemons
    remove_pod_containers
}

start() {
    need_root start
    if healthy && [[ -f $STATE/.smoke-ok ]]; then
        log "already up: $(kubectl get nodes --no-headers 2>/dev/null | awk '{print $1, $2, $5}')"
        return 0
    fi
    build
    deps
    stop_daemons
    remove_pod_containers
    # from here on, a start that fails stops the daemons it launched: no half-started control plane stays
    trap 'start_failed $?' EXIT
    rm -rf "$RUN/etcd" "$RUN/kubelet"
    write_config
    local ip
    ip=$(node_ip)
    [[ -n $ip ]] || die "docker0 has no IPv4 address (the kubelet's node address)"
    launch etcd etcd --name hpcjobs-testbed --data-dir "$RUN/etcd" \
        --listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
        --listen-peer-urls http://127.0.0.1:2380
    # The insecure port is gone in 1.20: a token user on the secure port, with every right.
    launch kube-apiserver "$BIN/kube-apiserver" --etcd-servers=http://127.0.0.1:2379 --bind-address=127.0.0.1 \
        --advertise-address=127.0.0.1 --secure-port=6443 --cert-dir="$RUN/apiserver-certs" \
        --token-auth-file="$STATE/tokens.csv" --authorization-mode=AlwaysAllow \
        --service-cluster-ip-range=10.96.0.0/16 --allow-privileged=true \
        --service-account-key-file="$STATE/pki/sa.pub" --service-account-signing-key-file="$STATE/pki/sa.key" \
        --service-account-issuer=https://kubernetes.default.svc
    wait_for "$TIMEOUT" "API server ready" kubectl get --raw /readyz \
        || { tail -20 "$LOGDIR/kube-apiserver.log" >&2; die "the API server did not answer"; }
    # nodeipam off: no pod CIDRs to give out (pods share docker's bridge); node lifecycle stays on, or
    # the node's not-ready taint is never lifted
    launch kube-controller-manager "$BIN/kube-controller-manager" --kubeconfig="$KUBECONFIG" --leader-elect=false \
        --controllers='*,-nodeipam' --service-account-private-key-file="$STATE/pki/sa.key" \
        --root-ca-file="$RUN/apiserver-certs/apiserver.crt"
    launch kube-scheduler "$BIN/kube-scheduler" --kubeconfig="$KUBECONFIG" --leader-elect=false
    # the node address must not be loopback (kubectl logs goes to it): docker0's
    launch kubelet "$BIN/kubelet" --kubeconfig="$KUBECONFIG" --container-runtime=docker --cgroup-driver=cgroupfs \
        --fail-swap-on=false --node-ip="$ip" --root-dir="$RUN/kubelet" --cert-dir="$RUN/kubelet-pki" \
        --pod-infra-container-image="$PAUSE_IMAGE" --image-gc-high-threshold=100 --eviction-hard= --network-plugin=
    wait_for "$TIMEOUT" "node Ready and untainted, default service account present" healthy \
        || { tail -20 "$LOGDIR/kubelet.log" >&2; die "the node never became Ready"; }
    smoke
    trap - EXIT
    touch "$STATE/.smoke-ok"
    log "up: Kubernetes $(kubectl version -o json 2>/dev/null | jq -r .serverVersion.gitVersion), KUBECONFIG=$KUBECONFIG"
}

stop() {
    need_root stop
    rm -f "$STATE/.smoke-ok"
    if kubectl get --raw /readyz >/dev/null 2>&1; then
        kubectl delete jobs --all-namespaces -l hpcjobs/tag --wait=false >/dev/null 2>&1 || true
    fi
    stop_daemons
    remove_pod_containers
    log "stopped"
}

status() {
    if healthy; then
        kubectl get nodes -o wide
        kubectl version -o json 2>/dev/null | jq -r '"server " + .serverVersion.gitVersion'
        return 0
    fi
    echo "Kubernetes testbed is not healthy (KUBECONFIG=$KUBECONFIG)" >&2
    return 1
}

case ${1:-} in
    build) build ;;
    start) start ;;
    stop) stop ;;
    status) status ;;
    *) echo "usage: $0 {start|stop|status|build}" >&2; exit 2 ;;
esac
