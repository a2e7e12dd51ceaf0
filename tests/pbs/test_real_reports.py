"""``hpcjobs report --from-file`` on what the real OpenPBS testbed recorded about our own jobs.

Four short jobs (CPU-bound, idle, ``exit 3``, deleted while held) run; once the server wrote each
one's final accounting record (``E``; a job deleted before it ran gets only ``Q`` and ``D``), the
report reads the server's accounting log of the day, our jobs' lines of it, and the
``qstat -E -x -f -F json`` answer for them saved to a file.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from hpcjobs import states
from hpcjobs.accounting.sources.pbs import read_pbs_accounting, read_qstat_json
from hpcjobs.config.experiment import Experiment
from hpcjobs.config.sites import load_site_file
from hpcjobs.render.script import render_job
from hpcjobs.resolve import resolve
from hpcjobs.schedulers.base import SubmitOptions
from hpcjobs.schedulers.client import SchedulerClient
from hpcjobs.schedulers.registry import get_backend
from hpcjobs.submit import submit_rendered
from pbs._real_helpers import SITE, cli_json, qdel_quietly, wait_final
from pbs.real import ACCOUNTING_DIR, PBS_EXEC, PbsServer, pbs

pytestmark = pytest.mark.pbs

JOBS: dict[str, tuple[str, SubmitOptions]] = {
    "busy": ("timeout 4 bash -c 'while :; do :; done' || true", SubmitOptions()),
    "idle": ("sleep 4", SubmitOptions()),
    "fail3": ("exit 3", SubmitOptions()),
    "gone": ("true", SubmitOptions(hold=True)),
}
EXPECTED = {"busy": (states.COMPLETED, 0), "idle": (states.COMPLETED, 0), "fail3": (states.FAILED, 3),
            "gone": (states.CANCELLED, None)}


def _key(job_id: str) -> str:
    return job_id.split(".", 1)[0]


@pytest.fixture(scope="module")
def finished(pbs_server_session: PbsServer, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    work = tmp_path_factory.mktemp("real-reports")
    work.chmod(0o777)
    client = SchedulerClient(get_backend("pbspro"), env={"HPCJOBS_PBS_BIN": str(PBS_EXEC / "bin")})
    site = load_site_file(SITE)
    since = time.time() - 1
    ids: dict[str, str] = {}
    try:
        for name, (command, options) in JOBS.items():
            job = render_job(resolve(Experiment.model_validate({"name": f"rep-{name}", "command": command}), site))
            ids[name] = submit_rendered(job, client=client, submit_dir=work, options=options).job_id
        client.cancel([ids["gone"]])
        attrs = wait_final(list(ids.values()))
        records = {name: pbs_server_session.wait_accounting(jid, "D" if name == "gone" else "E", since=since)
                   for name, jid in ids.items()}
    except BaseException:
        qdel_quietly(list(ids.values()))
        raise
    lines = [line for line in pbs_server_session.accounting_records(since=since)
             if line.split(";")[2:3] and line.split(";")[2] in ids.values()]
    own_log = work / "own-accounting.log"
    own_log.write_text("\n".join(lines) + "\n")
    qstat_json = work / "qstat.json"
    qstat_json.write_text(pbs(["qstat", "-E", "-x", "-f", "-F", "json", *ids.values()]).stdout)
    return {"work": work, "ids": ids, "attrs": attrs, "records": records, "own_log": own_log,
            "qstat_json": qstat_json}


def _report(finished: dict[str, Any], source: Path) -> dict[str, list[dict[str, Any]]]:
    return cli_json(["report", "--from-file", str(source), "--scheduler", "pbspro", "--json", "--top", "100000"],
                    cwd=finished["work"])


def _check_rows(finished: dict[str, Any], rows: list[dict[str, Any]]) -> None:
    by_id = {_key(r["job_id"]): r for r in rows}
    ids = finished["ids"]
    for name in ("busy", "idle", "fail3"):
        row = by_id[_key(ids[name])]
        assert row["state"] == EXPECTED[name][0], (name, row)
        assert 3.0 <= row["elapsed"] <= 60.0 or name == "fail3", (name, row)
    # The mom samples usage every 10-120 s (min/max_check_poll) and a job of a few seconds often
    # ends unsampled with cput 00:00:00 even when CPU-bound: efficiency follows what was recorded.
    for name in ("busy", "idle"):
        row = by_id[_key(ids[name])]
        cput = _seconds(_field(finished["records"][name], "resources_used.cput"))
        assert row["cpu_efficiency"] is not None and 0.0 <= row["cpu_efficiency"] <= 1.0, (name, row)
        assert (row["cpu_efficiency"] > 0.0) == (cput > 0), (name, cput, row)
    assert by_id[_key(ids["idle"])]["cpu_efficiency"] < 0.2


def _field(record: str, key: str) -> str:
    """A ``key=value`` field of an accounting line."""
    return next(w.split("=", 1)[1] for w in record.split(";", 3)[3].split() if w.startswith(key + "="))


def _seconds(hms: str) -> int:
    h, m, s = (int(x) for x in hms.split(":"))
    return h * 3600 + m * 60 + s


def test_report_on_our_accounting_lines(finished: dict[str, Any]):
    tables = _report(finished, finished["own_log"])
    _check_rows(finished, tables["worst_cpu_waste"])
    exits = {(r["state"], r["exit_code"]): r["jobs"] for r in tables["failures_by_exit"]}
    assert exits.get((states.FAILED, 3)) == 1, tables["failures_by_exit"]
    by_state = {r["state"]: r["jobs"] for r in tables["failures_by_state"]}
    assert by_state == {states.COMPLETED: 2, states.FAILED: 1, states.CANCELLED: 1}, by_state


def test_report_on_the_whole_accounting_log_of_the_day(finished: dict[str, Any]):
    day = time.strftime("%Y%m%d", time.localtime())
    tables = _report(finished, ACCOUNTING_DIR / day)
    _check_rows(finished, tables["worst_cpu_waste"])


def test_report_on_saved_qstat_json(finished: dict[str, Any]):
    data = json.loads(finished["qstat_json"].read_text())
    assert set(data["Jobs"]) == set(finished["ids"].values())  # -E: every id in one answer
    tables = _report(finished, finished["qstat_json"])
    _check_rows(finished, tables["worst_cpu_waste"])
    by_state = {r["state"]: r["jobs"] for r in tables["failures_by_state"]}
    assert by_state == {states.COMPLETED: 2, states.FAILED: 1, states.CANCELLED: 1}, by_state


def test_library_rows_agree_with_the_server(finished: dict[str, Any]):
    ids = finished["ids"]
    for frame in (read_pbs_accounting(finished["own_log"]), read_qstat_json(finished["qstat_json"].read_text())):
        rows = {_key(r["job_id"]): r for r in frame.to_dict(orient="records")}
        for name, jid in ids.items():
            row = rows[_key(jid)]
            state, code = EXPECTED[name]
            assert row["state"] == state, (name, row["state"])
            assert (None if row["exit_code"] is None or str(row["exit_code"]) == "<NA>" else int(row["exit_code"])) \
                == code, (name, row["exit_code"])
            server_exit = finished["attrs"][next(j for j in finished["attrs"] if _key(j) == _key(jid))].get(
                "Exit_status")
            assert server_exit == code, (name, server_exit)
