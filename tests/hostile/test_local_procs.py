"""``hpcjobs cancel`` on the local site signals only process groups hpcjobs started.

A record names a process by pid, start time, boot id and a secret in the process's environment, and
the process must lead its group. Every record that differs from the real one in any field, and
every record of pid 1, of this process, of a process that is not a group leader, is refused. The
checks here send signal 0 (nothing is delivered), so a failing check harms nothing.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hpcjobs.sweep.local_procs import PROC_SECRET_VAR, ProcRecord, boot_id, process_start_time

pytestmark = pytest.mark.skipif(not Path("/proc/sys/kernel/random/boot_id").exists(), reason="needs Linux /proc")

SECRET = "0123456789abcdef0123456789abcdef"


@pytest.fixture(scope="module")
def ours() -> Iterator[tuple[subprocess.Popen[bytes], ProcRecord]]:
    """A process started as the runner starts a point: its own session, the secret in its environment."""
    proc = subprocess.Popen(["sleep", "300"], start_new_session=True, env={**os.environ, PROC_SECRET_VAR: SECRET})
    start = process_start_time(proc.pid)
    assert start is not None
    try:
        yield proc, ProcRecord(proc.pid, start, "p0", boot_id(), SECRET)
    finally:
        proc.kill()
        proc.wait()


def test_the_real_record_matches(ours: tuple[subprocess.Popen[bytes], ProcRecord]) -> None:
    _, rec = ours
    assert rec.is_alive()
    assert rec.signal_group(0)


def test_boot_id_is_this_boots() -> None:
    text = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    assert boot_id() == text


def _start_of(pid: int) -> int:
    start = process_start_time(pid)
    assert start is not None
    return start


@pytest.mark.parametrize("who", ["pid 1", "this process", "pid 0", "negative pid"])
def test_pid_1_and_this_process_are_never_signalled(who: str) -> None:
    pid = {"pid 1": 1, "this process": os.getpid(), "pid 0": 0, "negative pid": -os.getpid()}[who]
    start = process_start_time(abs(pid)) if pid else 0
    rec = ProcRecord(pid, start or 0, "p0", boot_id(), SECRET)
    assert not rec.is_alive()
    assert not rec.signal_group(0)


def test_a_process_that_does_not_lead_its_group_is_not_signalled() -> None:
    # the child runs in the group of its parent, with the secret in its environment
    script = "import subprocess, sys; p = subprocess.Popen(['sleep', '300']); print(p.pid, flush=True); p.wait()"
    parent = subprocess.Popen([sys.executable, "-c", script], start_new_session=True, stdout=subprocess.PIPE,
                              env={**os.environ, PROC_SECRET_VAR: SECRET})
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        assert os.getpgid(child) == parent.pid != child
        rec = ProcRecord(child, _start_of(child), "p0", boot_id(), SECRET)
        assert not rec.is_alive()
    finally:
        os.killpg(parent.pid, 9)
        parent.wait()


def test_an_unrelated_group_leader_with_the_right_pid_and_start_is_not_signalled() -> None:
    victim = subprocess.Popen(["sleep", "300"], start_new_session=True)  # no secret: not ours
    try:
        rec = ProcRecord(victim.pid, _start_of(victim.pid), "p0", boot_id(), SECRET)
        assert not rec.is_alive()
        assert not rec.signal_group(15)
        assert victim.poll() is None
    finally:
        victim.kill()
        victim.wait()


_fields = st.sampled_from(["pid", "start_time", "boot", "secret"])


@settings(max_examples=200, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(field=_fields, text=st.text(max_size=40), number=st.integers(min_value=-(2**40), max_value=2**40))
def test_any_field_that_differs_from_the_real_record_is_refused(
        ours: tuple[subprocess.Popen[bytes], ProcRecord], field: str, text: str, number: int) -> None:
    _, rec = ours
    if field in ("pid", "start_time"):
        changed = replace(rec, **{field: number})
        if getattr(changed, field) == getattr(rec, field):
            return
    else:
        if text == getattr(rec, field):
            return
        changed = replace(rec, **{field: text or None})
    assert not changed.is_alive(), changed


def test_a_record_without_boot_or_secret_never_matches(ours: tuple[subprocess.Popen[bytes], ProcRecord]) -> None:
    _, rec = ours
    assert not replace(rec, boot=None).is_alive()
    assert not replace(rec, secret=None).is_alive()
    assert not ProcRecord(rec.pid, rec.start_time, rec.point_id).is_alive()
