"""The ``results:`` declaration, reading each point's metrics (cached), load_sweep's join, ``hpcjobs results``."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

import hpcjobs
from hpcjobs.cli import main
from hpcjobs.config.loading import load_experiment
from hpcjobs.config.results import ResultSource, result_sources
from hpcjobs.errors import ConfigError
from hpcjobs.sweep import results as results_mod
from hpcjobs.sweep.results import read_points, reduce_rows, results_frame, typed_column


def _load(tmp_path: Path, results_yaml: str) -> ConfigError | list[ResultSource]:
    exp = tmp_path / "exp.yaml"
    exp.write_text(f"name: t\ncommand: 'true'\n{results_yaml}")
    try:
        return list(result_sources(load_experiment(exp)[0].results))
    except ConfigError as exc:
        return exc


@pytest.mark.parametrize(("yaml_text", "needle"), [
    ("results: {file: /etc/passwd}\n", "is absolute"),
    ("results: {file: ~/m.json}\n", "is absolute"),
    ("results: {file: ../other/metrics.json}\n", "leaves the point's run folder"),
    ("results:\n  - {file: ok.json}\n  - {stdout_regex: 'acc=([0-9.]+)'}\n", "named group"),
    ("results: {stdout_regex: 'acc=(?P<acc>[0-9.]+'}\n", "not a valid regular expression"),
    ("results: {file: m.json, reduce: median}\n", "expected last, first, min:COLUMN or max:COLUMN"),
    ("results: {file: m.out}\n", "cannot tell the format"),
    ("results: {file: m.json, stdout_regex: 'a=(?P<a>1)'}\n", "exactly one of"),
])
def test_bad_declarations_name_file_and_line(tmp_path: Path, yaml_text: str, needle: str):
    err = _load(tmp_path, yaml_text)
    assert isinstance(err, ConfigError), err
    problem = err.problems[0]
    assert needle in str(problem)
    assert problem.file and problem.file.endswith("exp.yaml") and problem.line and problem.line >= 3


def test_good_declarations(tmp_path: Path):
    one = _load(tmp_path, "results: {file: metrics.json}\n")
    assert isinstance(one, list) and one[0].file_format == "json"
    many = _load(tmp_path, "results:\n  - {file: sub/e.csv, reduce: 'max:val_acc'}\n"
                           "  - {stdout_regex: 'acc=(?P<acc>[0-9.]+)'}\n")
    assert isinstance(many, list) and [s.label for s in many] == ["sub/e.csv", "stdout"]


def _point(folder: Path, pid: str, files: dict[str, str | bytes]) -> Path:
    run = folder / "points" / pid
    run.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (run / name).parent.mkdir(parents=True, exist_ok=True)
        if isinstance(data, bytes):
            (run / name).write_bytes(data)
        else:
            (run / name).write_text(data)
    return run


def test_each_format_and_reduce(tmp_path: Path):
    csv_text = "epoch,loss,acc\n1,0.9,0.5\n2,0.4,0.7\n3,0.6,0.6\n"
    _point(tmp_path, "p1", {
        "m.json": json.dumps({"acc": 0.75, "n": 3, "ok": True, "name": "x", "val": {"loss": 0.25}, "hist": [1, 2]}),
        "e.csv": csv_text, "e.tsv": csv_text.replace(",", "\t"),
        "e.jsonl": '{"step": 1, "acc": 0.1}\n{"step": 2, "acc": 0.3}\n{"step": 3, "ac',  # last line still written
        "stdout.log": "acc=0.5\nnoise\nacc=0.875 epoch=2\n",
    })
    sources = [
        ResultSource(file="m.json"),
        ResultSource(file="e.csv", reduce="min:loss", prefix="best_"),
        ResultSource(file="e.tsv", reduce="max:acc", prefix="top_"),
        ResultSource(file="e.jsonl", prefix="last_"),
        ResultSource(stdout_regex=r"acc=(?P<log_acc>[0-9.]+)(?: epoch=(?P<epoch>\d+))?"),
    ]
    values, error = read_points(tmp_path, ["p1"], sources, cache=False)["p1"]
    assert error is None
    assert values == {"acc": 0.75, "n": 3, "ok": True, "name": "x", "val.loss": 0.25,
                      "best_epoch": 2, "best_loss": 0.4, "best_acc": 0.7,
                      "top_epoch": 2, "top_loss": 0.4, "top_acc": 0.7,
                      "last_step": 2, "last_acc": 0.3, "log_acc": 0.875, "epoch": 2}
    assert reduce_rows([{"a": 1}, {"a": 5}, {"a": 5}], "max:a", "f") is not None
    assert reduce_rows([{"a": 1, "i": 0}, {"a": 5, "i": 1}, {"a": 5, "i": 2}], "max:a", "f")["i"] == 1


def test_bad_files_are_nulls_with_errors_never_an_exception(tmp_path: Path):
    _point(tmp_path, "ok", {"m.json": '{"acc": 1.5}'})
    _point(tmp_path, "broken", {"m.json": '{"acc": '})
    _point(tmp_path, "list", {"m.json": "[1, 2]"})
    _point(tmp_path, "big", {"m.json": json.dumps({"acc": 1.0, "pad": "x" * 5000})})
    _point(tmp_path, "binary", {"m.json": b"\xff\xfe\x00garbage"})
    fifo_run = _point(tmp_path, "fifo", {})
    os.mkfifo(fifo_run / "m.json")  # opening must not block
    sources = [ResultSource(file="m.json", max_bytes=1000)]
    ids = ["ok", "broken", "list", "big", "binary", "fifo", "missing"]
    frame = results_frame(tmp_path, ids, sources=sources, cache=False)
    assert frame["acc"].dtype == "Float64"
    assert frame["acc"].tolist()[0] == 1.5 and frame["acc"].isna().tolist() == [False] + [True] * 6
    errors = dict(zip(ids, frame["result_error"], strict=True))
    assert errors["ok"] is pd.NA
    assert "not valid JSON" in errors["broken"]
    assert "expected a JSON object" in errors["list"]
    assert "more than the limit of 1,000 bytes" in errors["big"]
    assert "not valid JSON" in errors["binary"]
    assert "not a regular file" in errors["fifo"]
    assert errors["missing"] == "m.json: no such file"
    assert frame["log_err"][0].endswith("points/ok/stderr.log")


def test_typed_columns():
    assert str(typed_column([1, None, 3]).dtype) == "Int64"
    assert str(typed_column([1, 2.5, None]).dtype) == "Float64"
    assert str(typed_column([True, None]).dtype) == "boolean"
    assert str(typed_column(["a", 1, None]).dtype) == "string"


def test_cache_reads_only_changed_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    ids = [f"p{i}" for i in range(20)]
    for i, pid in enumerate(ids):
        _point(tmp_path, pid, {"m.json": json.dumps({"acc": i})})
    sources = [ResultSource(file="m.json")]
    opened: list[Path] = []
    real = results_mod.read_source

    def counting(source: ResultSource, run_dir: Path) -> dict:
        opened.append(run_dir)
        return real(source, run_dir)

    monkeypatch.setattr(results_mod, "read_source", counting)
    first = results_frame(tmp_path, ids, sources=sources)
    assert len(opened) == 20 and first["acc"].tolist() == list(range(20))
    opened.clear()
    assert results_frame(tmp_path, ids, sources=sources)["acc"].tolist() == list(range(20))
    assert opened == []  # nothing changed: nothing opened
    (tmp_path / "points" / "p3" / "m.json").write_text(json.dumps({"acc": 300, "extra": 1}))
    again = results_frame(tmp_path, ids, sources=sources)
    assert [p.name for p in opened] == ["p3"]
    assert again["acc"][3] == 300 and again["extra"].notna().sum() == 1
    # another declaration: the cache does not apply
    opened.clear()
    results_frame(tmp_path, ids, sources=[ResultSource(file="m.json", prefix="m_")])
    assert len(opened) == 20
    # a corrupt cache is read around, then rewritten
    (tmp_path / results_mod.RESULTS_CACHE_FILE).write_text("{not json")
    assert results_frame(tmp_path, ids, sources=sources)["acc"][3] == 300
    json.loads((tmp_path / results_mod.RESULTS_CACHE_FILE).read_text())


EXPERIMENT = """\
name: restest
command: |
  echo "val_acc=$a"
  test "$x" != 2 || { echo "diverged at x=$x" >&2; exit 5; }
  printf '{"acc": %s, "x2": %d, "x": 0}\\n' "$a" $((x * x)) > "$HPCJOBS_RUN_DIR/metrics.json"
results:
  - {file: metrics.json}
  - {stdout_regex: 'val_acc=(?P<printed>[0-9.]+)'}
sweep:
  zip: {x: [1, 2, 3, 4], a: [0.5, 0.9, 0.7, 0.6]}
"""


@pytest.fixture
def local_results_sweep(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "exp.yaml").write_text(EXPERIMENT)
    result = CliRunner().invoke(main, ["sweep", "exp.yaml", "--site", "local", "--json", "--workers", "2"])
    assert result.exit_code == 0, result.output
    return str(json.loads(result.output)["sweep_id"])


def test_load_sweep_joins_results_and_logs(local_results_sweep: str):
    df = hpcjobs.load_sweep(local_results_sweep).sort_values("index").reset_index(drop=True)
    assert df["acc"].dtype == "Float64" and df["x2"].dtype == "Int64" and df["printed"].dtype == "Float64"
    assert df["acc"].tolist()[0] == 0.5 and df["acc"].isna().tolist() == [False, True, False, False]
    assert df["x2"].tolist()[2:] == [9, 16]
    assert df["printed"].tolist() == [0.5, 0.9, 0.7, 0.6]  # from stdout, even for the failed point
    assert df["x"].tolist() == [1, 2, 3, 4] and df["result_x"].tolist()[2:] == [0, 0]  # a metric named like a column
    failed = df[df["state"] == "FAILED"]
    assert failed["x"].tolist() == [2] and failed["result_error"].tolist() == ["metrics.json: no such file"]
    assert "diverged at x=2" in Path(failed["log_err"].iloc[0]).read_text()
    assert Path(df["log_out"][0]).read_text().strip() == "val_acc=0.5"


def test_results_command_sorts_and_prints(local_results_sweep: str):
    runner = CliRunner()
    out = runner.invoke(main, ["results", local_results_sweep, "--sort", "-acc", "--top", "2", "--csv"])
    assert out.exit_code == 0, out.output
    rows = out.output.splitlines()
    assert rows[0] == "index,point_id,a,x,state,exit_code,acc,x2,result_x,printed,result_error,log_out,log_err"
    assert [r.split(",")[3] for r in rows[1:]] == ["3", "4"]  # acc 0.7 then 0.6; the failed point's null last
    records = json.loads(runner.invoke(main, ["results", local_results_sweep, "--json", "--sort", "x2"]).output)
    assert [r["x"] for r in records] == [1, 3, 4, 2] and records[-1]["x2"] is None
    table = runner.invoke(main, ["results", local_results_sweep, "--sort", "-printed", "--top", "3"]).output
    assert "FAILED" in table and "COMPLETED" in table and "no such file" in table
    bad = runner.invoke(main, ["results", local_results_sweep, "--sort", "-nope"])
    assert bad.exit_code == 2 and "nope" in bad.output
