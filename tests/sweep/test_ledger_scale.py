"""The ledger at scale: version 1 ledgers upgraded, per-state counts, set-based writes that match the
per-point rules they replace, columnar and paged reads, and the memo of an unchanged poll."""

from __future__ import annotations

import json
import random
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hpcjobs.config.sweep import SweepSpec
from hpcjobs.errors import LedgerError
from hpcjobs.schedulers.base import JobStatus
from hpcjobs.schedulers.status_table import StatusTable, task_indices
from hpcjobs.sweep.ledger.store import LEDGER_FILE, SCHEMA_VERSION, Ledger, SweepMeta, experiment_sha256, new_token
from hpcjobs.sweep.points.expand import expand
from hpcjobs.sweep.points.point import Point
from hpcjobs.sweep.points.stream import sweep_points

ROOT = Path(__file__).resolve().parents[2]
V1_DUMP = ROOT / "tests" / "data" / "sweep" / "constructed_ledger_v1.sql"
META = SweepMeta("demo-1", "exp.yaml", experiment_sha256("name: demo\n"), "local", "slurm")


def _points(n: int) -> list[Point]:
    return expand(SweepSpec.model_validate({"grid": {"i": list(range(n))}}))


def _v1_ledger(folder: Path) -> Path:
    folder.mkdir(parents=True)
    con = sqlite3.connect(folder / LEDGER_FILE)
    con.executescript(V1_DUMP.read_text())
    con.close()
    return folder


def _rows(led: Ledger) -> list[tuple[Any, ...]]:
    return [(p.point_id, p.state, p.submission_token, p.array_job_id, p.array_index, p.job_id, p.state_raw,
             p.exit_code, p.attempt) for p in led.points()]


# ------------------------------------------------------------------------------ version 1 ledgers

def test_a_version_1_ledger_opens_upgraded_with_everything_kept(tmp_path: Path) -> None:
    d = _v1_ledger(tmp_path / "sweep")
    raw = sqlite3.connect(d / LEDGER_FILE)
    before = raw.execute("SELECT point_id, idx, state, submission_token, job_id, exit_code, updated_at FROM points "
                         "ORDER BY idx").fetchall()
    last = max(r[6] for r in before)
    raw.close()
    with Ledger.open(d) as led:
        assert led._con.execute("SELECT schema_version FROM sweep").fetchone()[0] == SCHEMA_VERSION == 2
        assert led.summary() == {"PLANNED": 2, "SUBMITTING": 3, "SUBMITTED": 2, "PENDING": 1, "RUNNING": 1,
                                 "COMPLETED": 1}
        assert led.check_invariants() == []
        after = led._con.execute("SELECT point_id, idx, state, submission_token, job_id, exit_code, updated_at "
                                 "FROM points ORDER BY idx").fetchall()
        assert after == before
        assert led.last_change() == last
        assert [s.token for s in led.unresolved_submissions()] == ["aaaaaaaaaaaaaaa3"]
        assert [s.job_id for s in led.strays()] == ["199"]
        indexes = {r[0] for r in led._con.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
        assert {"points_token_task", "points_planned"} <= indexes
        assert not {"points_state", "points_token", "submission_points_point"} & indexes
        # and it works as a version 2 ledger: a poll, a resolution, a new chunk
        assert led.record_status([JobStatus("101_3", "RUNNING", "RUNNING", "101", 3)]) == 1
        led.mark_failed("aaaaaaaaaaaaaaa3", "not in the queue")
        token = led.plan_chunk(led.pending_ids(), 5)
        led.mark_submitted(token, "106")
        assert led.summary()["SUBMITTED"] == 1 + 5 and led.check_invariants() == []  # 101_3 runs now
    with Ledger.open(d) as again:  # upgraded once
        assert again.check_invariants() == []


def test_a_version_1_ledger_is_re_planned_by_comparing_its_points_once(tmp_path: Path) -> None:
    d = _v1_ledger(tmp_path / "sweep")
    meta = SweepMeta("demo-0a1b2c3d", "exp.yaml", experiment_sha256("name: demo\n"), "hpctest", "slurm",
                     {"name": "demo"})
    spec = SweepSpec.model_validate({"grid": {"lr": [0.1, 0.01], "seed": [1, 2, 3, 4, 5]}})
    with Ledger.create(d, meta, sweep_points(spec)) as led:  # no digest stored yet: compared in SQL, then stored
        digest = led._con.execute("SELECT points_digest FROM sweep").fetchone()[0]
        assert digest == sweep_points(spec).digest()
        assert led.summary()["PLANNED"] == 2
    with pytest.raises(LedgerError, match="2 new, 0 no longer"):
        Ledger.create(d, meta, sweep_points(SweepSpec.model_validate({"grid": {"lr": [0.1, 0.01],
                                                                               "seed": [1, 2, 3, 4, 5, 6]}})))


def test_a_ledger_newer_than_this_hpcjobs_is_refused(tmp_path: Path) -> None:
    Ledger.create(tmp_path / "s", META, _points(2)).close()
    con = sqlite3.connect(tmp_path / "s" / LEDGER_FILE)
    con.execute("UPDATE sweep SET schema_version = 3")
    con.commit()
    con.close()
    with pytest.raises(LedgerError, match="schema version 3"):
        Ledger.open(tmp_path / "s")


# ------------------------------------------------------------------------------ counts and writes

def test_counts_follow_every_kind_of_write(tmp_path: Path) -> None:
    led = Ledger.create(tmp_path / "s", META, _points(30))
    ids = [p.point_id for p in led.points()]
    t1 = led.plan_chunk(ids[:10], 0)
    led.mark_submitted(t1, "100")
    t2 = led.plan_chunk(list(reversed(ids[10:15])), 1)  # not in index order: the per-id path
    led.mark_unknown(t2, "timed out")
    led.mark_failed(t2, "not found")
    t3 = led.plan_chunk(ids[15:20], 2)
    led.mark_submitted(t3, "200")
    led.record_status([JobStatus(f"100_{i}", "COMPLETED" if i % 2 else "FAILED", "X", "100", i, exit_code=i % 2)
                       for i in range(10)])
    led.record_status([JobStatus("200_[0-4]", "PENDING", "PENDING", "200", array_task_spec="0-4")])
    led.reset_for_resubmit([ids[i] for i in range(0, 10, 2)])
    t5 = led.plan_chunk(ids[20:25], 4)
    led.mark_submitted(t5, "400")
    assert led.mark_lost(t5, "never seen") == 5
    t4 = led.plan_chunk(led.pending_ids()[:1], 3, array=False)
    led.mark_submitted(t4, "300")
    led.record_status([JobStatus("300", "RUNNING", "R")])
    led.cancel_pending()
    assert led.check_invariants() == []
    counted: dict[str, int] = {}
    for p in led.points():
        counted[p.state] = counted.get(p.state, 0) + 1
    assert led.summary() == {s: counted[s] for s in led.summary()} and sum(led.summary().values()) == 30
    led.close()


def test_a_chunk_in_index_order_and_one_out_of_order_are_recorded_alike(tmp_path: Path) -> None:
    a = Ledger.create(tmp_path / "a", META, _points(12))
    b = Ledger.create(tmp_path / "b", META, _points(12))
    ids = [p.point_id for p in a.points()]
    chunk = ids[3:9]
    a.plan_chunk(chunk, 0, token="ab" * 8, first_index=2)  # consecutive rows: by index range
    b.plan_chunk(chunk, 0, token="ab" * 8, first_index=2)
    b2 = Ledger.create(tmp_path / "c", META, _points(12))
    odd = [ids[8], ids[3], ids[5]]
    b2.plan_chunk(odd, 0, token="cd" * 8)  # by id
    assert _rows(a) == _rows(b)
    assert [(p.point_id, p.array_index) for p in b2.points() if p.array_index is not None] == [
        (ids[3], 1), (ids[5], 2), (ids[8], 0)]
    assert b2.submission("cd" * 8).point_ids == tuple(odd)
    for led in (a, b, b2):
        assert led.check_invariants() == []
        led.close()


def test_plan_chunk_refusals_keep_their_messages(tmp_path: Path) -> None:
    with Ledger.create(tmp_path / "s", META, _points(5)) as led:
        ids = [p.point_id for p in led.points()]
        with pytest.raises(LedgerError, match="unknown points nope"):
            led.plan_chunk([ids[0], "nope"], 0)
        token = led.plan_chunk(ids[:2], 0)
        with pytest.raises(LedgerError, match=r"2 point\(s\) are not pending"):
            led.plan_chunk(ids[:3], 1)
        with pytest.raises(LedgerError, match="already used"):
            led.plan_chunk(ids[3:], 1, token=token)
        assert led.summary() == {"PLANNED": 3, "SUBMITTING": 2} and led.check_invariants() == []


def test_duplicate_point_ids_are_refused_streamed_or_not(tmp_path: Path) -> None:
    p = _points(2)
    with pytest.raises(LedgerError, match="duplicate point ids"):
        Ledger.create(tmp_path / "a", META, [p[0], Point(1, p[0].point_id, {}, "{}")])


# ------------------------------------------------------------------------------ status polls

def _reference_changes(rows: list[dict[str, Any]], records: list[JobStatus], key: Any) -> dict[str, tuple[Any, ...]]:
    """The per-point rule of Ledger.record_status before it was set-based (version 1), on plain rows."""
    live = [r for r in rows if r["array_job_id"] is not None or r["job_id"] is not None]
    by_task = {(key(r["array_job_id"]), r["array_index"]): r for r in live if r["array_job_id"] is not None}
    by_job = {key(r["job_id"]): r for r in live if r["array_job_id"] is None and r["job_id"] is not None}
    changes: dict[str, tuple[Any, ...]] = {}
    for rec in records:
        targets: list[dict[str, Any]] = []
        task_level = False
        if rec.array_job_id is not None and rec.array_task_id is not None:
            hit = by_task.get((key(rec.array_job_id), rec.array_task_id))
            targets, task_level = ([hit] if hit else []), True
        elif rec.array_job_id is not None and rec.array_task_spec:
            parent = key(rec.array_job_id)
            targets = [t for i in task_indices(rec.array_task_spec) if (t := by_task.get((parent, i)))]
        elif rec.array_task_spec is None:
            hit = by_job.get(key(rec.job_id))
            targets, task_level = ([hit] if hit else []), True
        for r in targets:
            job = rec.job_id if task_level else r["job_id"]
            changes[r["point_id"]] = (rec.state, rec.state_raw, rec.exit_code, job)
    return {pid: new for pid, new in changes.items()
            if next((r["state"], r["state_raw"], r["exit_code"], r["job_id"]) for r in live if r["point_id"] == pid)
            != new}


_STATES = ("PENDING", "RUNNING", "COMPLETED", "FAILED")


@st.composite
def _records(draw: Any) -> list[JobStatus]:
    out = []
    for _ in range(draw(st.integers(0, 25))):
        kind = draw(st.sampled_from(["task", "task", "task", "range", "plain", "parent", "stranger"]))
        state = draw(st.sampled_from(_STATES))
        raw = draw(st.sampled_from([state, state.lower(), "X"]))
        code = draw(st.sampled_from([None, 0, 3]))
        job = draw(st.sampled_from(["100", "101", "102.srv", "999"]))
        if kind == "task":
            i = draw(st.integers(0, 5))
            spelled = draw(st.sampled_from([f"{job}_{i}", f"{job}[{i}].x", "odd"]))
            out.append(JobStatus(spelled, state, raw, job, i, exit_code=code))
        elif kind == "range":
            lo = draw(st.integers(0, 4))
            spec = f"{lo}-{draw(st.integers(lo, 6))}" + draw(st.sampled_from(["", "%2"]))
            out.append(JobStatus(f"{job}_[{spec}]", state, raw, job, None, spec, exit_code=code))
        elif kind == "parent":
            out.append(JobStatus(job, state, raw, job, exit_code=code))
        else:
            out.append(JobStatus(draw(st.sampled_from(["200", "201", "998"])) if kind == "plain" else "77",
                                 state, raw, exit_code=code))
    return out


@settings(max_examples=60, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow,
                                                                               HealthCheck.function_scoped_fixture])
@given(polls=st.lists(_records(), min_size=1, max_size=3), pbs_keys=st.booleans())
def test_set_based_polls_change_exactly_what_the_per_point_rule_changed(tmp_path_factory: Any, polls: list[Any],
                                                                       pbs_keys: bool) -> None:
    d = tmp_path_factory.mktemp("poll")
    led = Ledger.create(d / "s", META, _points(24))
    ids = [p.point_id for p in led.points()]
    for n, (job, chunk) in enumerate([("100", ids[0:6]), ("101", ids[6:12]), ("102.srv.example", ids[12:18])]):
        led.mark_submitted(led.plan_chunk(chunk, n), job)
    for n, job in enumerate(["200", "201"]):
        led.mark_submitted(led.plan_chunk([ids[18 + n]], 10 + n, array=False), job)
    led.plan_chunk(ids[20:22], 20)  # in flight: never matched
    key = (lambda s: s.split(".")[0]) if pbs_keys else (lambda s: s)
    for records in polls:
        rows = [dict(zip(("point_id", "state", "state_raw", "exit_code", "job_id", "array_job_id", "array_index"), r,
                         strict=True)) for r in led._con.execute(
            "SELECT point_id, state, state_raw, exit_code, job_id, array_job_id, array_index FROM points")]
        want = _reference_changes(rows, records, key)
        assert led.record_status(records, job_key=key if pbs_keys else None) == len(want)
        got = {p.point_id: (p.state, p.state_raw, p.exit_code, p.job_id) for p in led.points()}
        for pid, new in want.items():
            assert got[pid] == new
        assert led.check_invariants() == []
    led.close()


def test_a_poll_of_many_tasks_is_applied_by_group(tmp_path: Path) -> None:
    led = Ledger.create(tmp_path / "s", META, _points(3000))
    ids = led.pending_ids()
    for n in range(3):
        led.mark_submitted(led.plan_chunk(ids[n * 1000:(n + 1) * 1000], n), str(500 + n))
    states = ["COMPLETED" if i % 7 else "FAILED" for i in range(1000)]
    table = StatusTable.from_records(JobStatus(f"{500 + n}_{i}", states[i], states[i], str(500 + n), i,
                                               exit_code=0 if i % 7 else 1) for n in range(3) for i in range(1000))
    assert len(table.groups) == 6
    assert led.apply_status(table) == 3000
    assert led.apply_status(table) == 0
    assert led.summary() == {"COMPLETED": 3 * 857, "FAILED": 3 * 143}
    assert {p.job_id for p in led.points("FAILED")} == {f"{500 + n}_{i}" for n in range(3) for i in range(0, 1000, 7)}
    assert led.check_invariants() == []
    led.close()


def test_the_memo_recognises_the_same_answer_only_on_an_unchanged_ledger(tmp_path: Path) -> None:
    led = Ledger.create(tmp_path / "s", META, _points(4))
    led.mark_submitted(led.plan_chunk(led.pending_ids(), 0), "7")
    table = StatusTable.from_records([JobStatus(f"7_{i}", "RUNNING", "R", "7", i) for i in range(4)])
    table.digest = "d" * 64
    assert not led.poll_memo("d" * 64, "a" * 64)
    assert led.apply_status(table, asked_sha256="a" * 64) == 4
    assert led.poll_memo("d" * 64, "a" * 64)
    assert not led.poll_memo("d" * 64, "b" * 64) and not led.poll_memo("e" * 64, "a" * 64)
    assert led.apply_status(StatusTable.recognised("d" * 64, ["7"])) == 0
    led.record_status([JobStatus("7_0", "COMPLETED", "CD", "7", 0)])
    assert not led.poll_memo("d" * 64, "a" * 64)  # the ledger changed since
    table.digest = None  # an answer that needed more than its text: not remembered
    led.apply_status(table, asked_sha256="a" * 64)
    assert not led.poll_memo("d" * 64, "a" * 64)
    led.close()


def test_the_updated_at_stamp_grows_with_every_write(tmp_path: Path) -> None:
    led = Ledger.create(tmp_path / "s", META, _points(3))
    stamps = [led.last_change()]
    token = led.plan_chunk(led.pending_ids()[:1], 0)
    stamps.append(led.last_change())
    led.mark_submitted(token, "1")
    stamps.append(led.last_change())
    led.correct_job_id(token, "2", "test")
    stamps.append(led.last_change())
    assert stamps == sorted(stamps) and len(set(stamps)) == len(stamps)
    led.close()


# ------------------------------------------------------------------------------ reads

def test_points_pages_columns_and_json(tmp_path: Path) -> None:
    with Ledger.create(tmp_path / "s", META, _points(25)) as led:
        ids = [p.point_id for p in led.points()]
        led.plan_chunk(ids[5:10], 0)
        assert [p.point_id for p in led.points(offset=20)] == ids[20:]
        assert [p.point_id for p in led.points(offset=3, limit=4)] == ids[3:7]
        assert [p.point_id for p in led.points("SUBMITTING", offset=1, limit=2)] == ids[6:8]
        assert led.points(limit=0) == []
        cols = led.point_columns(["point_id", "index", "state"])
        assert cols["point_id"] == tuple(ids) and cols["index"] == tuple(range(25))
        assert cols["state"].count("SUBMITTING") == 5
        lines = led.point_json(["point_id", "index", "array_index"]).decode().splitlines()
        assert [json.loads(x) for x in lines[4:6]] == [{"c0": ids[4], "c1": 4, "c2": None},
                                                       {"c0": ids[5], "c1": 5, "c2": 0}]
        params = led.params_json_lines().decode().splitlines()
        assert params == [p.params_json for p in led.points()]
        with pytest.raises(ValueError, match="unknown point columns"):
            led.point_columns(["nope"])
        assert led.pending_ids() == ids[:5] + ids[10:]
        assert led.max_chunk() == 0


def test_live_submissions_without_reading_every_point(tmp_path: Path) -> None:
    with Ledger.create(tmp_path / "s", META, _points(6)) as led:
        ids = led.pending_ids()
        a = led.plan_chunk(ids[:3], 0)
        led.mark_submitted(a, "10")
        b = led.plan_chunk(ids[3:], 1)
        led.mark_submitted(b, "11")
        led.record_status([JobStatus(f"10_{i}", "COMPLETED", "CD", "10", i) for i in range(3)])
        assert [s.job_id for s in led.live_submissions()] == ["11"]
        led.reset_for_resubmit(ids[:3])  # attempt 10 has no point left: still asked about, as polls always did
        assert [s.job_id for s in led.live_submissions()] == ["10", "11"]
        assert [s.job_id for s in led.live_submissions(with_unseated=False)] == ["11"]


def test_a_random_history_keeps_the_ledger_consistent(tmp_path: Path) -> None:
    rng = random.Random(5)
    led = Ledger.create(tmp_path / "s", META, _points(200))
    jobs: list[tuple[str, str, int]] = []
    for step in range(120):
        roll = rng.random()
        pending = led.pending_ids()
        if roll < 0.35 and pending:
            n = rng.randint(1, min(20, len(pending)))
            start = rng.randrange(len(pending) - n + 1)
            chunk = pending[start:start + n] if rng.random() < 0.7 else rng.sample(pending, n)
            token = led.plan_chunk(chunk, step, token=new_token())
            fate = rng.random()
            if fate < 0.7:
                led.mark_submitted(token, str(1000 + step))
                jobs.append((token, str(1000 + step), n))
            elif fate < 0.85:
                led.mark_failed(token, "refused")
            else:
                led.mark_unknown(token, "timeout")
        elif roll < 0.75 and jobs:
            token, job, n = rng.choice(jobs)
            state = rng.choice(["PENDING", "RUNNING", "COMPLETED", "FAILED", "TIMEOUT"])
            led.record_status([JobStatus(f"{job}_{i}", state, state, job, i) for i in range(n) if rng.random() < 0.8])
        elif roll < 0.85:
            done = [p.point_id for p in led.points(["COMPLETED", "FAILED", "TIMEOUT"])]
            led.reset_for_resubmit(rng.sample(done, min(len(done), 5)))
        elif roll < 0.95:
            for sub in led.unresolved_submissions():
                led.mark_failed(sub.token, "not found")
        assert led.check_invariants() == [], step
    led.close()
