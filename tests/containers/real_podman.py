"""What the real Podman tests on the Slurm and OpenPBS testbeds share: the images, the sweep, the checks.

``tests/containers/podman.sh image`` (run by scripts/test.sh beside the testbeds) installs Debian 12's
Podman and imports two local images; the jobs of both testbeds run ``podman run`` as hpcjobs renders it
(tests/containers/README.md has what was measured). A sweep's points each run in a container of the
self-contained python image, which holds no file of the host's scheduler: a point proves where it ran by
what it sees (``/run/.containerenv``, which Podman puts in every container, and no ``/etc/slurm`` or
``/opt/pbs``), writes its metrics into its run folder through the bind mount, and ``hpcjobs results``
reads them back on the host.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from helpers import run_hpcjobs
from real_testbed import Testbed, client

from hpcjobs.sweep.ledger.store import Ledger

IMAGE = "localhost/hpcjobs-testbed/python:1"
#: An empty root with merged-/usr links: jobs mount the host's /usr and /etc (and a Python prefix) into it.
HOSTFS = "localhost/hpcjobs-testbed/hostfs:1"

#: Each point's program, run by the image's own python3 (the host's Python is not in the container).
PROGRAM = """\
import json, os, sys
run, x = os.environ["HPCJOBS_RUN_DIR"], int(os.environ["x"])
if x == FAILING and not os.path.exists("fixed"):  # the submit folder is the container's working folder
    print(f"diverged at x={x} in the container", file=sys.stderr)
    sys.exit(3)
seen = {"sq": x * x,
        "containerenv": int(os.path.exists("/run/.containerenv")),
        "host_scheduler_files": int(os.path.exists("/etc/slurm") or os.path.exists("/opt/pbs")),
        "tag_passed": int(bool(os.environ.get("HPCJOBS_POINT_ID")))}
json.dump(seen, open(os.path.join(run, "metrics.json"), "w"))
print("in container", seen)
""".replace("FAILING", "1")


def _podman_problem() -> str | None:
    images = client(["podman", "image", "exists", IMAGE], timeout=30.0, check=False)
    if images.returncode != 0:
        return f"`podman image exists {IMAGE}` exited {images.returncode}: {images.stderr.strip()[:300]}"
    return None


#: Podman and the job image, as the real-testbed helper sees them (skip on a laptop, fail under CI=true).
PODMAN = Testbed("Podman", "sudo bash tests/containers/podman.sh image hpcpbs", _podman_problem)


def experiment(folder: Path, name: str, command: str, n: int, walltime: str = "5m") -> Path:
    """A sweep of ``n`` points ``x = 0..n-1`` whose command runs in the python image."""
    path = folder / f"{name}.yaml"
    path.write_text(
        f"name: {name}\n"
        f"description: run in {folder}\n"  # a new sweep id per test run
        f"resources: {{walltime: {walltime}}}\n"
        f"container: {{image: {IMAGE}, runtime: podman}}\n"
        f"command: {json.dumps(command)}\n"
        "results:\n  - {file: metrics.json}\n"
        f"sweep:\n  grid:\n    x: {list(range(n))}\n")
    return path


def sweep(folder: Path, exp: Path, site: Path, root: Path) -> str:
    """``hpcjobs sweep EXP --site SITE --json`` as a person runs it; the sweep id."""
    done = run_hpcjobs("sweep", str(exp), "--site", str(site), "--root", str(root), "--json", cwd=folder)
    assert done.returncode == 0, done.stdout + done.stderr
    return str(json.loads(done.stdout)["sweep_id"])


def wait_counts(sweep_id: str, root: Path, folder: Path, want: dict[str, int], timeout: float = 300.0) -> None:
    """Poll ``hpcjobs status --json`` until the point counts are ``want``."""
    deadline = time.monotonic() + timeout
    while True:
        st = run_hpcjobs("status", sweep_id, "--root", str(root), "--json", cwd=folder)
        assert st.returncode == 0, st.stderr
        counts = json.loads(st.stdout)["counts"]
        if counts == want:
            return
        assert time.monotonic() < deadline, f"sweep {sweep_id}: {counts}, waiting for {want}"
        time.sleep(2)


def point_ids(root: Path, sweep_id: str) -> list[str]:
    with Ledger.open(root / sweep_id) as ledger:
        return [p.point_id for p in ledger.points()]


def containers_of(points: list[str]) -> list[str]:
    """Names of Podman containers (running or not) that serve one of ``points`` (hpcjobs' ``--name``)."""
    names = client(["podman", "ps", "-a", "--format", "{{.Names}}"], timeout=30.0).stdout.split()
    return [n for n in names if n.startswith("hpcjobs-") and any(f"-{p}-" in n for p in points)]


def check_sweep(folder: Path, root: Path, site: Path, n: int) -> None:
    """The same sweep as without a container, in Podman: a failing point, its logs, resubmit, results.

    Point ``x = 1`` fails (exit 3, a line on stderr) until the file ``fixed`` exists in the submit
    folder; ``hpcjobs logs --failed`` shows that line; after ``fixed`` is made, ``hpcjobs resubmit``
    runs it again; then every point's metrics come back through ``hpcjobs results``, each saying it
    ran in a container, and Podman holds no container of the sweep (``--rm``).
    """
    (folder / "seen.py").write_text(PROGRAM)
    exp = experiment(folder, f"pod{site.stem.split('-')[-1]}", "python3 seen.py", n)
    sweep_id = sweep(folder, exp, site, root)
    wait_counts(sweep_id, root, folder, {"COMPLETED": n - 1, "FAILED": 1})
    logs = run_hpcjobs("logs", sweep_id, "--failed", "--err", "--root", str(root), cwd=folder)
    assert logs.returncode == 0, logs.stderr
    assert "diverged at x=1 in the container" in logs.stdout, logs.stdout
    (folder / "fixed").write_text("")
    again = run_hpcjobs("resubmit", sweep_id, "--root", str(root), cwd=folder)
    assert again.returncode == 0, again.stdout + again.stderr
    wait_counts(sweep_id, root, folder, {"COMPLETED": n})
    res = run_hpcjobs("results", sweep_id, "--root", str(root), "--json", cwd=folder)
    assert res.returncode == 0, res.stderr
    rows = json.loads(res.stdout)
    assert sorted(int(r["sq"]) for r in rows) == [x * x for x in range(n)], rows
    assert {(r["containerenv"], r["host_scheduler_files"], r["tag_passed"]) for r in rows} == {(1, 0, 1)}, rows
    assert containers_of(point_ids(root, sweep_id)) == []


def check_cancel_stops_the_container(folder: Path, root: Path, site: Path, timeout: float = 120.0) -> None:
    """A point sleeping in its container; ``hpcjobs cancel``; the container is gone soon after.

    The container is not the job's child (conmon detaches it): without ``--init`` it outlives
    ``scancel``/``qdel`` (measured), so this fails if the rendered command loses it.
    """
    exp = experiment(folder, "podcancel", "echo started > \"$HPCJOBS_RUN_DIR/started\"; exec sleep 300", 1)
    sweep_id = sweep(folder, exp, site, root)
    points = point_ids(root, sweep_id)
    deadline = time.monotonic() + timeout
    while not containers_of(points):
        assert time.monotonic() < deadline, "the point's container never started"
        time.sleep(1)
    cancelled = run_hpcjobs("cancel", sweep_id, "--root", str(root), cwd=folder)
    assert cancelled.returncode == 0, cancelled.stdout + cancelled.stderr
    deadline = time.monotonic() + 60
    while left := containers_of(points):
        assert time.monotonic() < deadline, f"containers left 60 s after the cancel: {left}"
        time.sleep(1)
    wait_counts(sweep_id, root, folder, {"CANCELLED": 1}, timeout=120)
