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
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
log() { printf '\n== %s\n' "$*" >&2; }

log "installing hpcjobs and its test dependencies"
"$PYTHON" -m pip install --quiet --disable-pip-version-check -e ".[test]"

if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    die() { log "ERROR: $*"; exit 1; }
    # shellcheck source=tests/testbed_lib.sh
    . tests/testbed_lib.sh                   # apt_need: installs what is missing, never leaves apt broken
    apt_need shellcheck chromium             # every script must pass shellcheck; the HTML report is screenshotted
    testbeds_t0=$(date +%s)
    log "starting the one-node Slurm testbed"
    start=$(date +%s)
    bash tests/slurm/testbed.sh start
    log "Slurm testbed up in $(( $(date +%s) - start )) s"
    # Kubernetes' server binaries take longest when there is no cached build (Debian's source package,
    # 16-20 min on 2 cores): that build runs beside the OpenPBS and Swarm starts (apt is taken in turn)
    log "building or restoring the Kubernetes server binaries in the background"
    k8s_build_start=$(date +%s)
    bash tests/kubernetes/testbed.sh build &
    k8s_build_pid=$!
    log "starting the one-node OpenPBS testbed (restores a cached build, or builds the vendored source)"
    start=$(date +%s)
    bash tests/pbs/testbed.sh start
    log "OpenPBS testbed up in $(( $(date +%s) - start )) s"
    log "starting the one-node Docker Swarm testbed (docker.io from Debian)"
    start=$(date +%s)
    bash tests/swarm/testbed.sh start
    log "Swarm testbed up in $(( $(date +%s) - start )) s"
    wait "$k8s_build_pid" || { log "the Kubernetes build failed (its messages are above)"; exit 1; }
    log "Kubernetes server binaries ready $(( $(date +%s) - k8s_build_start )) s after the build began"
    log "starting the one-node Kubernetes testbed"
    start=$(date +%s)
    bash tests/kubernetes/testbed.sh start
    log "Kubernetes testbed up in $(( $(date +%s) - start )) s"
    log "all testbeds up in $(( $(date +%s) - testbeds_t0 )) s"
else
    log "not root with apt-get: not starting the testbeds (tests marked 'slurm', 'pbs', 'swarm' and 'kubernetes' will skip)"
fi

# PyTorch for the distributed-launch tests (DDP on gloo through the torchrun template). Pinned: this exact
# version is the CPU build these machines carry on disk; an unpinned torch pulls a CUDA build of several GB.
if ! "$PYTHON" -c "import torch" >/dev/null 2>&1; then
    log "installing torch==2.13.0 (CPU)"
    "$PYTHON" -m pip install --quiet --disable-pip-version-check torch==2.13.0 \
        || log "torch could not be installed: the DDP tests will skip (and fail under CI=true)"
fi

log "running the tests"
exec "$PYTHON" -m pytest "$@"
