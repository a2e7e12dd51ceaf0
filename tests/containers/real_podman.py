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


def check_pull_at_submission(folder: Path, root: Path, site: Path, n: int = 2) -> None:
    """``containers.pull: submit``: hpcjobs saves the image into the cache before queueing; the jobs run that file.

    The image is a tag made for this test only and removed as soon as ``hpcjobs sweep`` returns, so a
    job that reached for the tag rather than the OCI archive would fail. A second sweep reuses the
    archive (``fetched: false``, the file unchanged). An image that cannot be fetched stops the sweep
    before anything is written or queued: exit 1, Podman's own error shown, no ledger.
    """
    import uuid

    tag = f"localhost/hpcjobs-pull-test/{uuid.uuid4().hex[:12]}:1"
    cache = folder / "images"
    pulled = folder / f"{site.stem}-pulled.yaml"
    pulled.write_text(site.read_text().replace(f"name: {site.stem}", f"name: {site.stem}-pulled")
                      + f"  pull: submit\n  image_cache: {cache}\n")
    (folder / "seen.py").write_text(PROGRAM.replace("if x == 1 and", "if False and"))
    client(["podman", "tag", IMAGE, tag], timeout=60.0)
    try:
        exp = experiment(folder, "podpull", "python3 seen.py", n)
        exp.write_text(exp.read_text().replace(IMAGE, tag))
        done = run_hpcjobs("sweep", str(exp), "--site", str(pulled), "--root", str(root), "--json", cwd=folder)
        assert done.returncode == 0, done.stdout + done.stderr
    finally:
        client(["podman", "untag", IMAGE, tag], timeout=60.0, check=False)
    report = json.loads(done.stdout)
    (image,) = report["images"]
    assert image["fetched"] is True and image["reference"] == tag and image["runtime"] == "podman", image
    archive = Path(image["path"])
    assert archive.parent == cache and archive.suffix == ".tar" and archive.stat().st_size > 1_000_000, image
    assert not [p for p in cache.iterdir() if p != archive], list(cache.iterdir())  # no temporary folder left
    scripts = list((root / report["sweep_id"]).rglob("*.sh"))
    assert scripts and all(f"oci-archive:{archive}" in s.read_text() for s in scripts if "podman" in s.read_text())
    wait_counts(report["sweep_id"], root, folder, {"COMPLETED": n})
    res = run_hpcjobs("results", report["sweep_id"], "--root", str(root), "--json", cwd=folder)
    assert res.returncode == 0, res.stderr
    rows = json.loads(res.stdout)
    assert sorted(int(r["sq"]) for r in rows) == [x * x for x in range(n)], rows
    assert {r["containerenv"] for r in rows} == {1}, rows

    # a second sweep of the same image reuses the archive: its jobs run while the tag no longer exists
    stamp = archive.stat().st_mtime_ns
    exp.write_text(exp.read_text().replace("name: podpull", "name: podpull2"))
    again = run_hpcjobs("sweep", str(exp), "--site", str(pulled), "--root", str(root), "--json", cwd=folder)
    assert again.returncode == 0, again.stdout + again.stderr
    assert [i["fetched"] for i in json.loads(again.stdout)["images"]] == [False]
    assert archive.stat().st_mtime_ns == stamp
    wait_counts(json.loads(again.stdout)["sweep_id"], root, folder, {"COMPLETED": n})

    # an image nobody can fetch: nothing is queued
    missing = experiment(folder, "podmissing", "python3 seen.py", n)
    missing.write_text(missing.read_text().replace(IMAGE, "localhost/hpcjobs-pull-test/missing:1"))
    failed = run_hpcjobs("sweep", str(missing), "--site", str(pulled), "--root", str(root), "--json", cwd=folder)
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "could not fetch image localhost/hpcjobs-pull-test/missing:1 with podman" in failed.stderr, failed.stderr
    assert "nothing was submitted" in failed.stderr and "registry" in failed.stderr, failed.stderr
    seen = 0
    for ledger_folder in (p for p in root.iterdir() if (p / "ledger.sqlite").exists()):
        with Ledger.open(ledger_folder) as ledger:
            if ledger.meta.experiment_path.endswith("podmissing.yaml"):
                seen += 1
                assert ledger.submissions(with_points=False) == [], "a job was submitted"
                assert [p.job_id for p in ledger.points()] == [None] * n
    assert seen == 0, "a ledger was written for a sweep whose image could not be fetched"
