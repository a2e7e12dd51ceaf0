#!/usr/bin/env bash
# The full test suite from a fresh machine: install hpcjobs with its test extras, bring up what the
# tests need (shellcheck, the one-node Slurm testbed) when this machine allows it, run pytest.
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
    if ! command -v shellcheck >/dev/null 2>&1; then
        log "installing shellcheck"
        apt-get install -y --no-install-recommends shellcheck >/dev/null 2>&1 \
            || { apt-get update >/dev/null && apt-get install -y --no-install-recommends shellcheck >/dev/null; }
    fi
    log "starting the one-node Slurm testbed"
    start=$(date +%s)
    bash tests/slurm/testbed.sh start
    log "Slurm testbed up in $(( $(date +%s) - start )) s"
else
    log "not root with apt-get: not starting the Slurm testbed (tests marked 'slurm' will skip)"
fi

log "running the tests"
exec "$PYTHON" -m pytest "$@"
