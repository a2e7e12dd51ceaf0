#!/usr/bin/env bash
# hpcjobs Podman testbed piece: Debian 12's Podman, and a small local job image, for containers inside
# the jobs of the Slurm and OpenPBS testbeds (no registry is reachable from CI).
#
# Usage (as root):  bash tests/containers/podman.sh {install|image [USER...]|smoke|bundle [DIR]|status}
#
#   install  apt-get install podman and what it runs with (crun, runc, uidmap, slirp4netns, fuse-overlayfs,
#            catatonit) when missing; write the containers.conf drop-in (cgroupfs, file events, runtime,
#            limits) and /etc/containers/storage.conf (root's images in the testbeds' state, overlay)
#   image [USER...]
#            install, then build the job images when missing, in root's storage and in the (rootless)
#            storage of each USER (e.g. the OpenPBS testbed's hpcpbs). Idempotent.
#   smoke    image, then one `podman run` of each image (the way hpcjobs' jobs run it)
#   bundle [DIR]
#            an OCI bundle (DIR/rootfs from the python image, DIR/config.json from `runc spec --rootless`)
#            for `sbatch --container=DIR` on a Slurm with oci.conf; default DIR $STATE/bundle. Idempotent.
#   status   versions, storage, images; exit 0 when podman answers and both images exist, else 1
#
# See tests/containers/README.md for what was measured and what breaks.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
readonly STATE=/var/lib/hpcjobs-testbed/containers     # removed by the fresh-machine drill with the other state
readonly IMAGE_HOSTFS=${HPCJOBS_PODMAN_IMAGE_HOSTFS:-localhost/hpcjobs-testbed/hostfs:1}
readonly IMAGE_PYTHON=${HPCJOBS_PODMAN_IMAGE_PYTHON:-localhost/hpcjobs-testbed/python:1}
readonly TIMEOUT=${TESTBED_TIMEOUT:-60}
# runc: crun cannot run containers on a cgroups-v1 ("hybrid") machine; the Swarm testbed installs it too
readonly PACKAGES=(podman crun runc uidmap slirp4netns fuse-overlayfs catatonit)
# Podman reads /etc/containers/containers.conf.d/*.conf after containers.conf: one drop-in of ours
# (dpkg does not own it, so purging the packages leaves it: see README.md for what a drill must remove)
readonly CONF_DROPIN=/etc/containers/containers.conf.d/50-hpcjobs-testbed.conf
# root's image store inside the testbeds' state (the drill unmounts and removes it), not /var/lib/containers.
# Debian ships no /etc/containers/storage.conf (containers-storage is only suggested): this one is ours,
# and one a machine already has is left alone.
readonly STORAGE_CONF=/etc/containers/storage.conf
readonly STORAGE_TAG="# Written by hpcjobs tests/containers/podman.sh"

T0=${EPOCHREALTIME/[.,]/}
elapsed() { local now=${EPOCHREALTIME/[.,]/}; printf '%d.%d' $(( (now - T0) / 1000000 )) $(( (now - T0) / 100000 % 10 )); }
log() { printf '[podman-testbed %6ss] %s\n' "$(elapsed)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }
need_root() { [[ $(id -u) -eq 0 ]] || die "must run as root (sudo bash $0 $1)"; }
# shellcheck source=tests/testbed_lib.sh
. "$HERE/../testbed_lib.sh"

write_conf() {  # the containers.conf drop-in this machine kind needs (see tests/containers/README.md)
    # - no systemd as PID 1, no journald: cgroupfs and a file event log
    # - cgroups v1 with a cgroup2 hierarchy beside it ("hybrid"): crun 1.8 refuses every container
    #   ("cgroups in hybrid mode not supported"), runc runs them; on a pure cgroup v2 machine crun is kept
    # - no CAP_SYS_RESOURCE in CI sandboxes: podman's default limits for root (nofile 1048576) are above
    #   the hard limits and the runtime's setrlimit fails ("setrlimit `RLIMIT_NOFILE`: Operation not
    #   permitted"); `--ulimit host` does not help in podman 4.3. So the defaults are limits every job
    #   here may set: pbs_mom runs jobs with a hard nofile of 16384 (Slurm jobs inherit the submitter's),
    #   and podman runs itself with nproc 32768 (kernel.pid_max here), so a higher nproc fails too.
    local want runtime=crun nofile nproc
    [[ -e /sys/fs/cgroup/cgroup.controllers ]] || runtime=runc
    nofile=$(ulimit -Hn); { [[ $nofile == unlimited ]] || (( nofile > 16384 )); } && nofile=16384
    nproc=$(ulimit -Hu); { [[ $nproc == unlimited ]] || (( nproc > 32768 )); } && nproc=32768
    want=$(cat <<CONF
# Written by hpcjobs tests/containers/podman.sh (install); rewritten when the machine differs.
[containers]
default_ulimits = ["nofile=$nofile:$nofile", "nproc=$nproc:$nproc"]
[engine]
cgroup_manager = "cgroupfs"
events_logger = "file"
runtime = "$runtime"
CONF
)
    [[ -f $CONF_DROPIN && $(<"$CONF_DROPIN") == "$want" ]] && return 0
    mkdir -p "${CONF_DROPIN%/*}"
    printf '%s\n' "$want" >"$CONF_DROPIN"
    log "wrote $CONF_DROPIN (runtime $runtime, nofile $nofile, nproc $nproc)"
}

write_storage_conf() {
    local want
    want=$(cat <<CONF
$STORAGE_TAG: root's images live in the testbeds' state.
[storage]
# overlay for rootless users too (the kernel's own: fuse-overlayfs needs /dev/fuse, root-only here, and
# without this podman picks vfs, which copies the whole image for every container)
driver = "overlay"
graphroot = "$STATE/storage"
runroot = "/run/hpcjobs-containers"
CONF
)
    if [[ -f $STORAGE_CONF ]]; then
        [[ $(<"$STORAGE_CONF") == "$want" ]] && return 0
        if ! grep -qF "$STORAGE_TAG" "$STORAGE_CONF"; then
            log "$STORAGE_CONF is the machine's own: left alone (images go where it says)"
            return 0
        fi
    fi
    mkdir -p "$STATE/storage"
    printf '%s\n' "$want" >"$STORAGE_CONF"
    log "wrote $STORAGE_CONF (graphroot $STATE/storage)"
}

cmd_install() {
    need_root install
    apt_need "${PACKAGES[@]}"
    write_conf
    write_storage_conf
    log "podman $(podman --version | awk '{print $3}'), runtime $(podman info --format '{{.Host.OCIRuntime.Path}}' 2>/dev/null)"
}

image_exists() { podman image exists "$1" 2>/dev/null; }

empty_root() {  # empty_root DIR: Debian 12's merged-/usr links and the usual mount points
    local root=$1
    chmod 755 "$root"  # mktemp -d made it 0700: / of the image, which a non-root container user must enter
    mkdir -p "$root"/{usr/bin,usr/lib,usr/lib64,etc,tmp,var/tmp,proc,sys,dev,run,root,home,sbin}
    chmod 1777 "$root/tmp" "$root/var/tmp"
    ln -s usr/bin "$root/bin"; ln -s usr/lib "$root/lib"; ln -s usr/lib64 "$root/lib64"
}

import_root() {  # import_root DIR IMAGE MESSAGE
    tar -C "$1" -c . | podman import -q -c 'ENV PATH=/usr/local/bin:/usr/bin:/bin' -c 'ENV LANG=C.UTF-8' \
        -m "$3" - "$2" >/dev/null || die "podman import $2 failed"
}

copy_in() {  # copy_in ROOT PATH...: each file at its /usr path (merged /usr), links followed
    local root=$1 f dest; shift
    for f in "$@"; do
        dest=$f
        [[ $dest == /usr/* ]] || dest=/usr$dest
        [[ -e $root$dest ]] && continue
        mkdir -p "$root${dest%/*}"
        cp -L "$f" "$root$dest"
    done
}

build_hostfs() {  # an empty root: jobs bind-mount the host's /usr and /etc read-only (as on Swarm)
    local root
    root=$(mktemp -d)
    empty_root "$root"
    rmdir "$root"/usr/bin "$root"/usr/lib "$root"/usr/lib64
    import_root "$root" "$IMAGE_HOSTFS" 'hpcjobs testbed: bind-mount the host /usr and /etc read-only'
    rm -rf "$root"
}

build_python() {  # a self-contained image: Debian's bash, coreutils and python3.11 (stdlib) copied from this host
    local root py=/usr/bin/python3.11 progs=() p libs
    [[ -x $py ]] || die "$py missing (Debian's python3.11-minimal): cannot build $IMAGE_PYTHON"
    root=$(mktemp -d)
    empty_root "$root"
    for p in bash sh dash cat env ls mkdir rm cp mv ln sleep date id hostname uname tee test true false \
             printf echo head tail wc sort sed grep tr dirname basename pwd chmod touch readlink; do
        p=$(type -P "$p") && progs+=("$p")
    done
    copy_in "$root" "${progs[@]}" "$py"
    ln -sf python3.11 "$root/usr/bin/python3"
    # the standard library without its tests and caches (Debian's /usr/lib/python3/dist-packages stays out)
    tar -C / -c --exclude=usr/lib/python3.11/test --exclude=__pycache__ usr/lib/python3.11 | tar -C "$root" -x
    # every shared library the programs and the stdlib's extension modules load, and the loader
    libs=$( { ldd "${progs[@]}" "$py"; find /usr/lib/python3.11/lib-dynload -name '*.so' -exec ldd {} +; } 2>/dev/null \
        | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// && $2 ~ /^\(0x/ {print $1}' | sort -u)
    # shellcheck disable=SC2086  # one path a word
    copy_in "$root" $libs
    printf 'root:x:0:0:root:/root:/bin/bash\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n' >"$root/etc/passwd"
    printf 'root:x:0:\nnogroup:x:65534:\n' >"$root/etc/group"
    import_root "$root" "$IMAGE_PYTHON" 'hpcjobs testbed: bash, coreutils and python3.11 from Debian 12'
    rm -rf "$root"
}

load_for_user() {  # load_for_user USER IMAGE: the image into USER's rootless storage, when missing
    local user=$1 image=$2 tar
    (cd / && runuser -u "$user" -- podman image exists "$image") 2>/dev/null && return 0
    tar=$(mktemp "${TMPDIR:-/tmp}/hpcjobs-image.XXXXXX")
    rm -f "$tar"  # podman save refuses an existing file ("docker-archive doesn't support modifying existing images")
    podman save -q -o "$tar" "$image" || die "podman save $image failed"
    chmod 644 "$tar"
    # cd /: the user may not enter the caller's folder; "/ is not a shared mount" is a harmless warning
    (cd / && runuser -u "$user" -- podman load -q -i "$tar") >/dev/null 2>&1 \
        || { rm -f "$tar"; die "podman load of $image as $user failed"; }
    rm -f "$tar"
    log "loaded $image into $user's storage"
}

cmd_image() {
    cmd_install
    local t user
    if ! image_exists "$IMAGE_HOSTFS"; then
        t=$SECONDS; build_hostfs; log "imported $IMAGE_HOSTFS ($(( SECONDS - t )) s)"
    fi
    if ! image_exists "$IMAGE_PYTHON"; then
        t=$SECONDS; build_python
        log "imported $IMAGE_PYTHON ($(( SECONDS - t )) s, $(podman image inspect -f '{{.Size}}' "$IMAGE_PYTHON") bytes)"
    fi
    for user in "$@"; do
        id "$user" >/dev/null 2>&1 || die "no user $user"
        grep -q "^$user:" /etc/subuid || die "$user has no /etc/subuid range (useradd adds one once uidmap is installed; else usermod --add-subuids)"
        load_for_user "$user" "$IMAGE_HOSTFS"
        load_for_user "$user" "$IMAGE_PYTHON"
    done
}

# How hpcjobs' jobs run a container here: the run folder bind-mounted at its own path, no network
# namespace (--network host: torchrun's rendezvous and NCCL/gloo use the node's addresses), the
# environment passed by name. --userns=keep-id is rootless only ("keep-id is only supported in rootless
# mode" as root).
run_like_a_job() {  # run_like_a_job IMAGE EXTRA_ARGS... -- COMMAND...
    local image=$1; shift
    local extra=()
    while (( $# )) && [[ $1 != -- ]]; do extra+=("$1"); shift; done
    shift
    timeout "$TIMEOUT" podman run --rm --network host -v "$STATE/smoke:$STATE/smoke" -w "$STATE/smoke" \
        --env HPCJOBS_SMOKE "${extra[@]}" "$image" "$@"
}

cmd_smoke() {
    cmd_image
    mkdir -p "$STATE/smoke"
    rm -f "$STATE/smoke"/*.out
    local out
    export HPCJOBS_SMOKE=ok
    # shellcheck disable=SC2016  # expanded inside the container
    out=$(run_like_a_job "$IMAGE_HOSTFS" -v /usr:/usr:ro -v /etc:/etc:ro -- \
        bash -c 'python3 -c "import os; print(os.environ[\"HPCJOBS_SMOKE\"])" >hostfs.out; cat hostfs.out') \
        || die "podman run $IMAGE_HOSTFS failed"
    [[ $out == ok ]] || die "podman run $IMAGE_HOSTFS printed '$out', not ok"
    # shellcheck disable=SC2016
    out=$(run_like_a_job "$IMAGE_PYTHON" -- \
        bash -c 'python3 -c "import os, json, hashlib; print(os.environ[\"HPCJOBS_SMOKE\"])" >python.out; cat python.out') \
        || die "podman run $IMAGE_PYTHON failed"
    [[ $out == ok ]] || die "podman run $IMAGE_PYTHON printed '$out', not ok"
    log "smoke: both images ran a python3 job step with the run folder bind-mounted"
}

cmd_bundle() {  # the rootfs is read-only and world-readable, so any user's rootless runtime can use it
    local dir=${1:-$STATE/bundle} c
    cmd_image
    if [[ ! -f $dir/config.json ]]; then
        rm -rf "$dir"
        mkdir -p "$dir/rootfs"
        c=$(podman create -q "$IMAGE_PYTHON" true) || die "podman create $IMAGE_PYTHON failed"
        podman export "$c" | tar -C "$dir/rootfs" -x || { podman rm "$c" >/dev/null; die "podman export failed"; }
        podman rm "$c" >/dev/null
        chmod 755 "$dir" "$dir/rootfs"
        # runc spec --rootless maps the caller's uid (0 here) to root in the container; Slurm's RunTime*
        # commands run as the job's user and a rootless runtime maps that user the same way
        (cd "$dir" && runc spec --rootless) || die "runc spec failed"
        log "OCI bundle $dir ($(du -sh "$dir/rootfs" | cut -f1))"
    fi
}

cmd_status() {
    need_root status
    local rc=0 i
    command -v podman >/dev/null || { echo "podman not installed"; return 1; }
    podman --version
    podman info --format 'runtime {{.Host.OCIRuntime.Path}}; cgroups {{.Host.CgroupsVersion}} {{.Host.CgroupManager}}; storage {{.Store.GraphRoot}} ({{.Store.GraphDriverName}})' \
        2>/dev/null || rc=1
    for i in "$IMAGE_HOSTFS" "$IMAGE_PYTHON"; do
        if image_exists "$i"; then echo "image $i"; else echo "image $i missing"; rc=1; fi
    done
    return "$rc"
}

case ${1:-} in
    install) cmd_install ;;
    image) shift; cmd_image "$@" ;;
    smoke) cmd_smoke ;;
    bundle) shift; cmd_bundle "$@" ;;
    status) cmd_status ;;
    *) echo "usage: $0 {install|image [USER...]|smoke|bundle [DIR]|status}" >&2; exit 2 ;;
esac
