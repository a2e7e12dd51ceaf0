#!/usr/bin/env bash
# The full test suite from a fresh machine: install hpcjobs with its test extras, bring up what the
# tests need (shellcheck, the one-node Slurm, OpenPBS, Docker Swarm and Kubernetes testbeds) when this machine
# allows it, run pytest.
#
#   bash scripts/test.sh            # everything
#   bash scripts/test.sh -m "not slurm" -x   # extra arguments go to pytest
#
# As root with apt (CI, a fresh Debian 12 box) it installs and starts everything. Elsewhere it runs
# what it can: tests that need Slurm skip with the reason, except under CI=true where they fail.
#
# With no arguments, as root, the suite runs in three parts so that a fresh machine does not wait for
# builds: the tests that need no testbed run while the testbeds are installed and built (the builds
# niced, so the tests keep their CPU), then the Slurm, OpenPBS and Swarm tests while the Kubernetes
# build finishes, then the Kubernetes tests. Every part runs whatever the one before it gave; the exit
# status is 0 only when all of them passed.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
log() { printf '\n== %s\n' "$*" >&2; }
TESTBED_MARKS="slurm or pbs or swarm or kubernetes or ssh"

install_python() {  # hpcjobs with its test extras, and PyTorch
    log "installing hpcjobs and its test dependencies"
    "$PYTHON" -m pip install --quiet --disable-pip-version-check -e ".[test]"
    # PyTorch for the distributed-launch tests (DDP on gloo through the torchrun template). Pinned: this exact
    # version is the CPU build these machines carry on disk; an unpinned torch pulls a CUDA build of several GB.
    if ! "$PYTHON" -c "import torch" >/dev/null 2>&1; then
        log "installing torch==2.13.0 (CPU)"
        "$PYTHON" -m pip install --quiet --disable-pip-version-check torch==2.13.0 \
            || log "torch could not be installed: the DDP tests will skip (and fail under CI=true)"
    fi
}

if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    install_python
    log "not root with apt-get: not starting the testbeds (tests marked 'slurm', 'pbs', 'swarm' and 'kubernetes' will skip)"
    log "running the tests"
    exec "$PYTHON" -m pytest "$@"
fi

die() { log "ERROR: $*"; exit 1; }
# shellcheck source=tests/testbed_lib.sh
. tests/testbed_lib.sh                       # apt_need: installs what is missing, never leaves apt broken

testbeds_t0=$SECONDS
TESTBED_LOGS=$(mktemp -d "${TMPDIR:-/tmp}/hpcjobs-testbeds.XXXXXX")

# SSH (the login node "laptop" tests reach), Slurm, then OpenPBS (restores a cached build, or builds the
# vendored source, niced), then Swarm, then Podman for containers in the Slurm and OpenPBS jobs.
# Each line it logs starts with "== ", like this script's own.
start_slurm_pbs_swarm() {
    local start
    start=$SECONDS
    # the SSH testbed first: its login user gets a Slurm association when the Slurm testbed starts
    bash tests/ssh/testbed.sh start || { log "the SSH testbed did not start"; return 1; }
    log "SSH testbed up in $(( SECONDS - start )) s"
    start=$SECONDS
    TESTBED_USERS="hpcssh ${TESTBED_USERS:-}" bash tests/slurm/testbed.sh start \
        || { log "the Slurm testbed did not start"; return 1; }
    log "Slurm testbed up in $(( SECONDS - start )) s"
    start=$SECONDS
    nice -n 10 bash tests/pbs/testbed.sh build || { log "the OpenPBS build failed"; return 1; }
    bash tests/pbs/testbed.sh start || { log "the OpenPBS testbed did not start"; return 1; }
    log "OpenPBS testbed up in $(( SECONDS - start )) s"
    start=$SECONDS
    bash tests/swarm/testbed.sh start || { log "the Docker Swarm testbed did not start"; return 1; }
    log "Swarm testbed up in $(( SECONDS - start )) s"
    # Podman and two local images for containers inside Slurm and OpenPBS jobs (tests/containers/README.md);
    # hpcpbs, the OpenPBS testbed's user, gets the images in its rootless storage too
    start=$SECONDS
    bash tests/containers/podman.sh image hpcpbs || { log "Podman for the testbeds' jobs could not be set up"; return 1; }
    log "Podman and the job images ready in $(( SECONDS - start )) s"
}

# Kubernetes' server binaries take longest when there is no cached build (Debian's source package,
# 10-20 min on 2 cores): that build starts first, before the Python installs, and runs niced beside
# everything else (apt is taken in turn).
log "building or restoring the Kubernetes server binaries in the background (log: $TESTBED_LOGS/kubernetes-build.log)"
nice -n 10 bash tests/kubernetes/testbed.sh build >"$TESTBED_LOGS/kubernetes-build.log" 2>&1 &
k8s_build_pid=$!
log "starting the Slurm, OpenPBS and Docker Swarm testbeds in the background (log: $TESTBED_LOGS/testbeds.log)"
start_slurm_pbs_swarm >"$TESTBED_LOGS/testbeds.log" 2>&1 &
testbeds_pid=$!
# whatever happens below, this script never exits while a testbed script still runs (it may hold apt);
# the logs are printed into this script's output, so their folder goes
trap 'wait "$testbeds_pid" "$k8s_build_pid" 2>/dev/null || true; rm -rf "$TESTBED_LOGS"' EXIT

# the builds and testbeds need none of this (bash, apt and Debian's python3): they start first
install_python
apt_need shellcheck chromium                 # every script must pass shellcheck; the HTML report is screenshotted

wait_testbeds() {
    local rc=0
    wait "$testbeds_pid" || rc=$?
    cat "$TESTBED_LOGS/testbeds.log" >&2
    ((rc == 0)) || die "a testbed did not start (its messages are above)"
    log "Slurm, OpenPBS and Swarm testbeds up in $(( SECONDS - testbeds_t0 )) s"
}

wait_kubernetes() {
    local rc=0 start
    wait "$k8s_build_pid" || rc=$?
    cat "$TESTBED_LOGS/kubernetes-build.log" >&2
    ((rc == 0)) || die "the Kubernetes build failed (its messages are above)"
    log "Kubernetes server binaries ready $(( SECONDS - testbeds_t0 )) s after the build began"
    log "starting the one-node Kubernetes testbed"
    start=$SECONDS
    bash tests/kubernetes/testbed.sh start
    log "Kubernetes testbed up in $(( SECONDS - start )) s"
    log "all testbeds up in $(( SECONDS - testbeds_t0 )) s"
}

if (($#)); then
    # pytest arguments of the caller's own: every testbed first, then one pytest run as asked
    wait_testbeds
    wait_kubernetes
    log "running the tests"
    exec "$PYTHON" -m pytest "$@"
fi

rc=0
part() {  # part NAME MARK-EXPRESSION [PYTEST-ARGS...]: one pytest run; its time, and a failure kept for the exit status
    local name=$1 marks=$2 start=$SECONDS part_rc=0
    shift 2
    log "running the tests $name"
    "$PYTHON" -m pytest -m "$marks" "$@" || part_rc=$?
    log "the tests $name took $(( SECONDS - start )) s (pytest exit $part_rc)"
    ((part_rc == 0)) || rc=$part_rc
}

# Two workers: these tests are CPU-bound and independent (each its own folders), and their time decides
# when the testbed parts begin.
workers=()
"$PYTHON" -c "import xdist" >/dev/null 2>&1 && workers=(-n 2)
part "that need no testbed (while the testbeds start)" "not ($TESTBED_MARKS)" "${workers[@]}"
wait_testbeds

# The Slurm, OpenPBS and Swarm tests side by side: one pytest process per scheduler, each scheduler's tests
# one after another in file order, as they share its queue (some stop Slurm's accounting for a while).
# Separate processes rather than pytest-xdist's --dist loadgroup, which stops grouping, silently, with
# pytest 9.2's node ids (pytest-dev/pytest-xdist#1386). Each part's output is printed when all have ended.
side_by_side() {  # side_by_side NAME:MARKS...: one background pytest per part, each with its own folders
    local spec name marks start=$SECONDS pids=() names=() i part_rc seconds
    log "running the tests on the Slurm, OpenPBS and Swarm testbeds, side by side"
    for spec in "$@"; do
        name=${spec%%:*} marks=${spec#*:}
        mkdir -p "$TESTBED_LOGS/tmp-$name"
        # (`|| part_rc=$?`: under set -e a failing pytest would end the subshell before its status is written)
        { part_rc=0
          "$PYTHON" -m pytest -m "$marks" -p no:cacheprovider --basetemp "$TESTBED_LOGS/tmp-$name/pytest" \
              >"$TESTBED_LOGS/tests-$name.log" 2>&1 || part_rc=$?
          echo "$part_rc $(( SECONDS - start ))" >"$TESTBED_LOGS/tests-$name.rc"; } &
        pids+=("$!") names+=("$name")
    done
    for i in "${!pids[@]}"; do
        wait "${pids[$i]}" || true
        name=${names[$i]}
        log "the $name tests (output follows)"
        cat "$TESTBED_LOGS/tests-$name.log" >&2
        read -r part_rc seconds <"$TESTBED_LOGS/tests-$name.rc" || { part_rc=1 seconds="?"; }
        log "the tests on the $name testbed took $seconds s (pytest exit $part_rc)"
        ((part_rc == 0)) || rc=$part_rc
    done
    log "the tests on the Slurm, OpenPBS and Swarm testbeds took $(( SECONDS - start )) s in all"
}
# a test carrying several testbed marks runs with the first of slurm, pbs, swarm it has; the tests from a
# "laptop" over the SSH testbed (to Slurm and OpenPBS) run after the OpenPBS tests, the shortest part
side_by_side "slurm:slurm" "pbs:(pbs or ssh) and not slurm" "swarm:swarm and not (slurm or pbs or ssh)"
wait_kubernetes
part "on the Kubernetes testbed" "kubernetes"
log "suite done: pytest exit status $rc"
exit "$rc"
