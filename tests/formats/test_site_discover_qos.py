"""Slurm QOS and association limits in discovered sites (recorded on the Slurm testbed) and the QOS check."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hpcjobs.config.experiment import Experiment
from hpcjobs.config.site import SiteConfig
from hpcjobs.config.validation import validate_document
from hpcjobs.config.yamlio import parse_yaml
from hpcjobs.errors import ConfigError
from hpcjobs.resolve import resolve
from hpcjobs.schedulers.slurm.discover import build_slurm_site
from hpcjobs.schedulers.slurm.discover_qos import (
    QOS_ARGV,
    assoc_argv,
    default_qos,
    parse_parsable2,
    parse_submit_limits,
    qos_limits,
    tres_count,
    user_qos_names,
    wall_seconds,
)
from hpcjobs.sites.diff import diff_site
from hpcjobs.sites.discover import site_yaml

SLURM = Path(__file__).resolve().parents[1] / "data" / "slurm" / "testbed"
QOS_FMT = (SLURM / "sacctmgr_show_qos_format_parsable2.txt").read_text()
QOS_ALL = (SLURM / "sacctmgr_show_qos_parsable2_with_limits.txt").read_text()
ASSOC = (SLURM / "sacctmgr_show_assoc_format_parsable2.txt").read_text()
CAPTURED = "hpcjobs_capture_28837"


def _site(assoc: str = ASSOC, qos: str = QOS_FMT) -> SiteConfig:
    found = build_slurm_site((SLURM / "scontrol_show_config.txt").read_text(),
                             (SLURM / "scontrol_show_partition_oneliner.txt").read_text(),
                             (SLURM / "scontrol_show_node_oneliner.txt").read_text(), assoc_text=assoc, qos_text=qos)
    return validate_document(SiteConfig, parse_yaml(site_yaml(found)))


def test_argv_are_separate_words_and_keep_the_header() -> None:
    assert assoc_argv("root")[3:6] == ["associations", "where", "user=root"]
    assert "--noheader" not in QOS_ARGV and "--noheader" not in assoc_argv("root")
    assert QOS_ARGV[-1] == "format=Name,MaxSubmitJobsPerUser,MaxWall,MaxTRESPerJob,GrpTRES,Flags"


def test_recorded_qos_table_field_by_field() -> None:
    rows = {r["Name"]: r for r in parse_parsable2(QOS_FMT)}
    assert list(rows) == ["normal", CAPTURED]
    assert rows[CAPTURED] == {"Name": CAPTURED, "MaxSubmitPU": "7", "MaxWall": "00:10:00",
                              "MaxTRES": "cpu=2,gres/gpu=1", "GrpTRES": "cpu=4,gres/gpu=1", "Flags": "DenyOnLimit"}
    assert rows["normal"]["MaxWall"] == "" and rows["normal"]["MaxSubmitPU"] == ""
    expected = {CAPTURED: {"max_walltime": "00:10:00", "max_submitted_jobs": 7, "max_cpus_per_job": 2,
                           "max_gpus_per_job": 1}}
    for text in (QOS_FMT, QOS_ALL):  # the narrow query and the full `sacctmgr -P show qos` table agree
        got = {q: {k: v.value for k, v in f.items()} for q, f in qos_limits(text).items()}
        assert got == expected
    assert qos_limits(QOS_FMT)[CAPTURED]["max_cpus_per_job"].source == "sacctmgr show qos: MaxTRES=cpu=2,gres/gpu=1"


def test_recorded_testbed_qos_without_limits_gives_none() -> None:
    plain = (SLURM / "sacctmgr_show_qos_parsable2.txt").read_text()  # the testbed's own QOS table
    assert [r["Name"] for r in parse_parsable2(plain)] == ["normal"]
    assert qos_limits(plain) == {}


def test_recorded_associations_give_the_allowed_and_default_qos() -> None:
    rows = parse_parsable2(ASSOC)
    assert [r["Account"] for r in rows] == ["other", "hpcjobs", "root"]
    assert user_qos_names(ASSOC) == [CAPTURED, "normal"]
    assert {default_qos(r) for r in rows} == {"normal"}
    # MaxSubmitPU=7 is on a QOS the jobs do not run under unless they name it: no site-wide submit limit
    assert parse_submit_limits(ASSOC, QOS_FMT) == (None, "")


def test_submit_limit_is_the_tightest_of_associations_and_their_default_qos() -> None:
    header = "Cluster|Account|Partition|QOS|Def QOS|MaxSubmit|GrpSubmit|MaxWall\n"
    qos = "Name|MaxSubmitPU|MaxWall\nnormal|100|\nlong||2-00:00:00\nother|5|\n"
    assoc = header + "c|a||normal,long||200||\nc|b||long,other|long|150||\n"
    assert parse_submit_limits(assoc, qos) == (100, "sacctmgr show qos: MaxSubmitPU of normal "
                                                    "(the default QOS of account a)")
    assert parse_submit_limits(header + "c|b||other|other|||\n", qos)[0] == 5
    assert parse_submit_limits(header + "c|b||long,other||3||\n", qos) == (
        3, "sacctmgr show associations: MaxSubmit (account b)")


def test_discovered_site_has_qos_limits_with_sources() -> None:
    site = _site()
    assert site.limits.max_submitted_jobs is None
    limits = site.qos_limits[CAPTURED]
    assert (limits.max_walltime, limits.max_submitted_jobs, limits.max_cpus_per_job, limits.max_gpus_per_job) == (
        600, 7, 2, 1)
    assert list(site.qos_limits) == [CAPTURED]
    text = site_yaml(build_slurm_site((SLURM / "scontrol_show_config.txt").read_text(),
                                      (SLURM / "scontrol_show_partition_oneliner.txt").read_text(),
                                      (SLURM / "scontrol_show_node_oneliner.txt").read_text(),
                                      assoc_text=ASSOC, qos_text=QOS_FMT))
    assert f"qos_limits:\n  {CAPTURED}:\n    max_walltime: \"00:10:00\"  # sacctmgr show qos: MaxWall=00:10:00" in text
    assert "# qos_limits: normal set no MaxWall" in text
    assert "max_gpus_per_job: 1  # sacctmgr show qos: MaxTRES=cpu=2,gres/gpu=1" in text


def test_unreadable_sacctmgr_leaves_limits_out_with_a_note() -> None:
    found = build_slurm_site((SLURM / "scontrol_show_config.txt").read_text(),
                             (SLURM / "scontrol_show_partition_oneliner.txt").read_text(),
                             (SLURM / "scontrol_show_node_oneliner.txt").read_text())
    assert found.qos == {} and any("sacctmgr could not be read" in n for n in found.notes)


def _exp(**resources: object) -> Experiment:
    return Experiment.model_validate({"name": "q", "command": "true", "qos": CAPTURED,
                                      "resources": {"walltime": "00:05:00", **resources}})


def test_a_request_above_the_qos_maxwall_is_refused_naming_the_qos() -> None:
    site = _site()
    assert resolve(_exp(), site).qos == CAPTURED
    with pytest.raises(ConfigError) as err:
        resolve(_exp(walltime="00:20:00"), site, site_file="x.yaml")
    text = str(err.value)
    assert f"wall time 00:20:00 requested, QOS '{CAPTURED}' of site 'hpctest' (x.yaml) allows at most 00:10:00" in text
    assert "QOSMaxWallDurationPerJobLimit" in text
    with pytest.raises(ConfigError, match=r"4 CPUs per job requested .* allows at most 2"):
        resolve(_exp(cpus_per_task=4), site)
    with pytest.raises(ConfigError, match=r"2 GPUs per job requested .* allows at most 1"):
        resolve(_exp(gpus_per_node=2), site)
    # a job naming no QOS (and no default_qos) is not checked against a QOS it may not use
    plain = Experiment.model_validate({"name": "q", "command": "true", "resources": {"walltime": "00:20:00"}})
    assert resolve(plain, site).qos is None
    # default_qos counts as the job's QOS
    with_default = site.model_copy(update={"default_qos": CAPTURED})
    with pytest.raises(ConfigError, match=f"QOS '{CAPTURED}'"):
        resolve(plain, with_default)


def test_qos_limits_belong_to_slurm_sites_only() -> None:
    with pytest.raises(ConfigError, match="qos_limits are Slurm QOS limits"):
        validate_document(SiteConfig,
                          parse_yaml("name: p\nscheduler: pbspro\nqos_limits:\n  q:\n    max_walltime: 60\n"))


def test_site_diff_reports_a_changed_qos_limit() -> None:
    found = build_slurm_site((SLURM / "scontrol_show_config.txt").read_text(),
                             (SLURM / "scontrol_show_partition_oneliner.txt").read_text(),
                             (SLURM / "scontrol_show_node_oneliner.txt").read_text(),
                             assoc_text=ASSOC, qos_text=QOS_FMT)
    assert diff_site(_site(), found) == []
    doc = parse_yaml(site_yaml(found).replace('max_walltime: "00:10:00"', 'max_walltime: "02:00:00"'))
    assert diff_site(validate_document(SiteConfig, doc), found) == [
        f"qos {CAPTURED}: max_walltime 02:00:00 in the file, 00:10:00 on the cluster"]
    gone = build_slurm_site((SLURM / "scontrol_show_config.txt").read_text(),
                            (SLURM / "scontrol_show_partition_oneliner.txt").read_text(),
                            (SLURM / "scontrol_show_node_oneliner.txt").read_text(), assoc_text=ASSOC,
                            qos_text=QOS_FMT.replace("00:10:00", ""))
    assert diff_site(_site(), gone) == [f"qos {CAPTURED}: max_walltime 00:10:00 in the file, not set on the cluster"]


@pytest.mark.parametrize(("text", "cpus", "gpus"), [
    ("cpu=4,gres/gpu=1", 4, 1), ("gres/gpu:a100=2,gres/gpu:v100=1", None, 3), ("gres/gpu=4,gres/gpu:a100=2", None, 4),
    ("mem=10G,node=2", None, None), ("", None, None), ("cpu=0", None, None)])
def test_tres_spellings(text: str, cpus: int | None, gpus: int | None) -> None:
    assert (tres_count(text, "cpu"), tres_count(text, "gpu")) == (cpus, gpus)


@given(st.integers(0, 30), st.integers(0, 23), st.integers(0, 59), st.integers(0, 59))
def test_maxwall_spellings(d: int, h: int, m: int, s: int) -> None:
    total = ((d * 24 + h) * 60 + m) * 60 + s
    text = f"{d}-{h:02d}:{m:02d}:{s:02d}" if d else f"{h:02d}:{m:02d}:{s:02d}"
    assert wall_seconds(text) == (total or None)
    assert wall_seconds("UNLIMITED") is None and wall_seconds("") is None and wall_seconds("bogus") is None


@given(st.permutations(["Name", "MaxSubmitPU", "MaxWall", "MaxTRES", "GrpTRES", "Flags"]))
def test_columns_are_found_by_header_in_any_order(order: list[str]) -> None:
    values = {"Name": "q", "MaxSubmitPU": "3", "MaxWall": "01:00:00", "MaxTRES": "cpu=8", "GrpTRES": "", "Flags": ""}
    text = "|".join(order) + "\n" + "|".join(values[c] for c in order) + "\n"
    got = {k: v.value for k, v in qos_limits(text)["q"].items()}
    assert got == {"max_walltime": "01:00:00", "max_submitted_jobs": 3, "max_cpus_per_job": 8}
