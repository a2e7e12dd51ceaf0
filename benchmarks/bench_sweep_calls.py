"""Scheduler calls, time and memory of a large sweep, against a counting fake Slurm (no cluster needed).

Goals: ceil(N / (MaxArraySize - 1)) sbatch calls and one sacct call per status poll; on a
1,000,000-point sweep, plan + submit in at most 30 s, a status poll in at most 1 s once nothing
changed and 3 s when every point changed, ``load_sweep`` in at most 5 s, at most 1 GB of memory;
time linear in the number of points. Prints figures; asserts nothing.

Run::

    python benchmarks/bench_sweep_calls.py                    # 5,000 points
    python benchmarks/bench_sweep_calls.py --points 1000000   # one size, in detail
    python benchmarks/bench_sweep_calls.py --scaling          # 5k, 50k, 200k, 1M (one process each) and a table

The sweep is a grid of ``x`` (1,000 values) times ``seed`` (N / 1,000 values). The fake answers
``sacct`` with one line per array task (no step lines): every task RUNNING at the first three polls
(all points change; then nothing, with the same answer, which is recognised and not read again;
then nothing, with the jobs in another order, which is read and compared), COMPLETED at the fourth
(all change); the fifth has no live job left to ask about. ``ls`` polls once while the tasks run.
A poll's time is hpcjobs' (the fake's time making its answer, printed beside it, is taken off).
Peak memory is the process's maximum resident set size.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

from counting_slurm import CountingSlurm  # noqa: E402 (a sibling module of this script)

from hpcjobs import process  # noqa: E402

SIZES = (5_000, 50_000, 200_000, 1_000_000)
#: The fake's answer at each poll: every task's state, and whether the jobs come in reverse order.
POLLS = (("RUNNING", False), ("RUNNING", False), ("RUNNING", True), ("COMPLETED", False), ("COMPLETED", False))
POLL_WHAT = ("all points changed", "nothing changed, the same answer", "nothing changed, the answer reordered",
             "all points changed", "no live job left")


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _experiment(points: int) -> str:
    if points >= 1000 and points % 1000 == 0:
        grid = f"    x: {list(range(1000))}\n    seed: {list(range(points // 1000))}\n"
    else:
        grid = f"    x: {list(range(points))}\n"
    return f"name: bench\ncommand: echo $x $seed\nsweep:\n  max_points: {max(points, 1)}\n  grid:\n{grid}"


def run_one(points: int, max_array_size: int) -> dict[str, object]:
    """Plan and submit one sweep, poll it four times, load it; return the figures."""
    from hpcjobs.analysis import load_sweep
    from hpcjobs.sweep.api import list_sweeps, sweep_status

    fake = CountingSlurm(max_array_size)
    process.run_command = fake  # type: ignore[assignment]  # the seam every scheduler call goes through
    out: dict[str, object] = {"points": points}
    with tempfile.TemporaryDirectory() as tmp:
        os.chdir(tmp)
        os.environ["HPCJOBS_CACHE_DIR"] = str(Path(tmp) / "cache")
        exp = Path(tmp) / "bench.yaml"
        exp.write_text(_experiment(points))
        root = Path(tmp) / "sweeps"
        site = str(ROOT / "tests" / "sites" / "hpctest.yaml")
        from hpcjobs.sweep.api import run_sweep

        start = time.perf_counter()
        prepared, report = run_sweep(exp, site=site, root=root)
        out["plan_submit_s"] = time.perf_counter() - start
        out["sbatch"] = fake.calls["sbatch"]
        out["sbatch_goal"] = math.ceil(points / (max_array_size - 1))
        out["submitted"] = report.points_submitted
        polls = []
        for n, (state, reverse) in enumerate(POLLS):
            if n == 3:  # while the tasks run: ls asks the scheduler once for every sweep's live jobs
                before, answer = fake.status_calls, fake.answer_s
                start = time.perf_counter()
                list_sweeps(root, poll=True)
                out["ls_s"] = time.perf_counter() - start - (fake.answer_s - answer)
                out["ls_calls"] = fake.status_calls - before
            fake.state, fake.reverse = state, reverse
            before, answer = fake.status_calls, fake.answer_s
            start = time.perf_counter()
            st = sweep_status(prepared.sweep_id, root=root, points_limit=0)
            elapsed = time.perf_counter() - start
            fake_s = fake.answer_s - answer  # the fake scheduler making its answer: not hpcjobs' time
            polls.append({"s": elapsed - fake_s, "fake_s": fake_s, "changed": st.changed, "finished": st.finished,
                          "sacct": fake.status_calls - before})
        out["polls"] = polls
        start = time.perf_counter()
        page = sweep_status(prepared.sweep_id, root=root, poll=False, points_offset=points // 2, points_limit=100)
        out["status_page_s"] = time.perf_counter() - start
        out["page"] = len(page.points)
        from hpcjobs.accounting.schema import empty_frame

        start = time.perf_counter()
        frame = load_sweep(prepared.sweep_id, root=root, jobs=empty_frame(), results=False)
        out["load_sweep_s"] = time.perf_counter() - start
        out["load_rows"] = len(frame)
        del frame
        start = time.perf_counter()
        load_sweep(prepared.sweep_id, root=root, jobs=empty_frame())
        out["load_sweep_results_s"] = time.perf_counter() - start
        out["other_calls"] = {k: v for k, v in fake.calls.items() if k not in ("sbatch", "sacct")}
        os.chdir(ROOT)
    out["peak_mb"] = _peak_mb()
    return out


def _print_one(r: dict[str, object]) -> None:
    polls = r["polls"]
    assert isinstance(polls, list)
    print(f"{r['points']:,} points: planned, wrote the chunk files and submitted in {r['plan_submit_s']:.2f} s; "
          f"{r['sbatch']} sbatch calls (goal {r['sbatch_goal']}), {r['submitted']:,} points submitted")
    for i, (p, what) in enumerate(zip(polls, POLL_WHAT, strict=True), 1):
        print(f"  status poll {i} ({what}): {p['s']:.2f} s (+ {p['fake_s']:.2f} s the fake sacct took to answer), "
              f"{p['sacct']} sacct call(s), {p['changed']:,} points changed, {p['finished']:,} finished")
    print(f"  status --points page of {r['page']} (no poll): {r['status_page_s']:.3f} s; ls while the tasks run: "
          f"{r['ls_s']:.2f} s ({r['ls_calls']} sacct call)")
    print(f"  load_sweep: {r['load_sweep_s']:.2f} s ({r['load_rows']:,} rows), with results: "
          f"{r['load_sweep_results_s']:.2f} s")
    print(f"  other scheduler calls: {r['other_calls']}; peak memory {r['peak_mb']:.0f} MB")


def _table(rows: list[dict[str, object]]) -> None:
    base = rows[0]
    print("\n| points | plan + submit | µs per point | poll: all changed | poll: none changed (same answer / "
          "reordered) | poll: none live | load_sweep | peak RSS |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        polls = r["polls"]
        assert isinstance(polls, list)
        per = float(r["plan_submit_s"]) / int(r["points"]) * 1e6  # type: ignore[arg-type]
        print(f"| {r['points']:,} | {r['plan_submit_s']:.2f} s | {per:.1f} | {polls[0]['s']:.2f} s "
              f"| {polls[1]['s']:.2f} s / {polls[2]['s']:.2f} s | {polls[4]['s']:.2f} s | {r['load_sweep_s']:.2f} s "
              f"| {r['peak_mb']:.0f} MB |")
    print()
    for r in rows[1:]:
        n = int(r["points"]) / int(base["points"])  # type: ignore[arg-type]
        t = float(r["plan_submit_s"]) / float(base["plan_submit_s"])  # type: ignore[arg-type]
        p = r["polls"][0]["s"] / base["polls"][0]["s"]  # type: ignore[index]
        print(f"{r['points']:,} vs {base['points']:,}: {n:.0f}x the points, {t:.1f}x the plan + submit time, "
              f"{p:.1f}x the all-change poll")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--points", type=int, default=5000)
    parser.add_argument("--max-array-size", type=int, default=1001)
    parser.add_argument("--scaling", action="store_true", help="5k, 50k, 200k and 1M points, then a table")
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)  # one size, figures as JSON
    args = parser.parse_args()
    if args.scaling:
        rows = []
        for n in SIZES:
            env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
            done = subprocess.run([sys.executable, __file__, "--points", str(n), "--max-array-size",
                                   str(args.max_array_size), "--json"], capture_output=True, text=True, env=env,
                                  check=True)
            rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
            _print_one(rows[-1])
        _table(rows)
        return
    result = run_one(args.points, args.max_array_size)
    if args.json:
        print(json.dumps(result))
        return
    _print_one(result)
    _render_goal()


def _render_goal() -> None:
    """Expanding 10,000 points, their env text and one array script: the goal is at most 1 s."""
    from hpcjobs.config.sweep import SweepSpec
    from hpcjobs.render.script import render_job
    from hpcjobs.sweep.points.expand import expand
    from hpcjobs.sweep.points.point import point_env_file_text
    from hpcjobs.sweep.prepare import array_job_for_chunk, prepare_sweep

    with tempfile.TemporaryDirectory() as tmp:
        exp = Path(tmp) / "bench.yaml"
        exp.write_text(_experiment(1000))
        prepared = prepare_sweep(exp, site=str(ROOT / "tests" / "sites" / "hpctest.yaml"), root=Path(tmp))
    spec = SweepSpec.model_validate({"grid": {"lr": [10.0 ** -i for i in range(10)], "depth": list(range(10)),
                                              "seed": list(range(100))}})
    start = time.perf_counter()
    points = expand(spec)
    env_texts = [point_env_file_text(p) for p in points]
    job = array_job_for_chunk(prepared, 0, 1000, None)
    script = render_job(job).text
    elapsed = time.perf_counter() - start
    print(f"expanding {len(points)} points + their env files + the array script: {elapsed:.3f} s (goal <= 1 s); "
          f"{sum(map(len, env_texts)) / 1e6:.1f} MB of env files, script {len(script)} bytes")


if __name__ == "__main__":
    main()
