"""Kubernetes and Docker Swarm accounting rows, read from output captured on the testbeds
(``tests/data/kubernetes/``, ``tests/data/swarm/``: see SOURCES.md). Values pinned by hand from the files."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
from click.testing import CliRunner

from hpcjobs import states as st
from hpcjobs.accounting.report_source import detect_format, read_saved
from hpcjobs.accounting.schema import COLUMNS
from hpcjobs.accounting.sources.kubernetes import quantity
from hpcjobs.cli import main

DATA = Path(__file__).resolve().parent.parent / "data"
K8S = DATA / "kubernetes"
SWARM = DATA / "swarm"


def _t(text: str) -> pd.Timestamp:
    return pd.Timestamp(text, tz="UTC")


def test_quantities() -> None:
    assert [quantity(q) for q in ("1", "500m", "128Mi", "1G", "2Gi", "x", None)] == [
        1, 0.5, 128 * 2**20, 10**9, 2 * 2**30, None, None]


def test_kubernetes_points_with_queue_wait_and_failures() -> None:
    path = K8S / "get-jobs-pods-6-points-point3-failed.json"
    assert detect_format(path.read_text()) == "kubectl-json"
    df = read_saved(path)
    assert list(df.columns) == list(COLUMNS) and len(df) == 6
    row = df.set_index("array_task_id").loc[3]
    assert (row["state"], row["state_raw"], row["exit_code"]) == (st.FAILED, "BackoffLimitExceeded", 7)
    # Job created 10:59:53, its pod's container started 10:59:57 (the node had 2 CPUs for 6 one-CPU pods)
    assert (row["submit_time"], row["start_time"], row["end_time"]) == (
        _t("2026-12-04T10:59:53"), _t("2026-12-04T10:59:57"), _t("2026-12-04T10:59:57"))
    assert row["wait"] == pd.Timedelta(seconds=4) and row["time_limit"] == pd.Timedelta(minutes=5)
    assert (row["cpus"], row["req_mem_bytes"], row["partition"], row["node_list"]) == (1, 128 * 2**20, "default",
                                                                                        "vm")
    assert (row["sweep_id"], row["chunk"], row["scheduler"]) == ("capk-c3165f35", 0, "kubernetes")
    assert df["state"].value_counts()[st.COMPLETED] == 5


def test_kubernetes_deadline_and_oomkilled() -> None:
    df = read_saved(K8S / "get-jobs-pods-deadline-oomkilled-settled.json").set_index("array_task_id")
    # point 0's pod was deleted at the deadline: the Job's Failed condition is its end
    assert (df.loc[0, "state"], df.loc[0, "end_time"], df.loc[0, "time_limit"]) == (
        st.TIMEOUT, _t("2026-12-04T15:11:20"), pd.Timedelta(seconds=5))
    assert pd.isna(df.loc[0, "start_time"])
    assert (df.loc[1, "state"], df.loc[1, "exit_code"], df.loc[1, "req_mem_bytes"]) == (st.OUT_OF_MEMORY, 137,
                                                                                         64 * 2**20)


def test_swarm_saved_records_wall_time_and_oom() -> None:
    path = SWARM / "records-walltime-oom.json"
    assert detect_format(path.read_text()) == "swarm-json"
    df = read_saved(path).set_index("array_task_id")
    assert (df.loc[0, "state"], df.loc[0, "exit_code"]) == (st.TIMEOUT, 124)
    assert (df.loc[1, "state"], df.loc[1, "state_raw"], df.loc[1, "exit_code"]) == (st.OUT_OF_MEMORY,
                                                                                    "Failed (OOMKilled)", 137)
    # slot 1: task created 15:11:10.811279, container started 15:11:11.468002, finished 15:11:11.632606
    assert df.loc[1, "submit_time"] == _t("2026-12-04T15:11:10.811279")
    assert df.loc[1, "wait"] == pd.Timedelta(microseconds=656723)
    assert df.loc[1, "elapsed"] == pd.Timedelta(microseconds=164604)
    assert (df.loc[1, "cpus"], df.loc[1, "req_mem_bytes"], df.loc[1, "time_limit"]) == (1, 64 * 2**20,
                                                                                        pd.Timedelta(seconds=5))
    assert set(df["sweep_id"]) == {"slow-3ef84f7c"}


def test_swarm_docker_inspect_output(tmp_path: Path) -> None:
    """`docker inspect` of the service, its tasks and one container, as one saved list."""
    objects = [*json.loads((SWARM / "service-inspect-walltime-oom.json").read_text()),
               *json.loads((SWARM / "inspect-tasks-walltime-oom.json").read_text()),
               *json.loads((SWARM / "inspect-container-oomkilled.json").read_text())]
    path = tmp_path / "inspect.json"
    path.write_text(json.dumps(objects))
    df = read_saved(path).set_index("array_task_id")
    assert (df.loc[0, "state"], df.loc[1, "state"]) == (st.TIMEOUT, st.OUT_OF_MEMORY)
    assert pd.isna(df.loc[0, "start_time"])  # its container's record was not saved: no start, end from the task
    assert df.loc[0, "end_time"] == _t("2026-12-04T15:11:16.682290")


def test_report_from_file_shows_failures() -> None:
    for path in (K8S / "get-jobs-pods-deadline-oomkilled-settled.json", SWARM / "records-walltime-oom.json"):
        r = CliRunner().invoke(main, ["report", "--from-file", str(path), "--section", "failures", "--json"])
        assert r.exit_code == 0, r.output
        rows = json.loads(r.output)["failures_by_state"]
        assert {x["state"]: x["jobs"] for x in rows} == {"TIMEOUT": 1, "OUT_OF_MEMORY": 1}
