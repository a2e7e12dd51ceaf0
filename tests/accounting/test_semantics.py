"""CPUs, GPUs and memory as the scheduler meant them, across Slurm, PBS Pro and Torque.

Recorded inputs are the real captures of ``tests/data`` (``tests/data/SOURCES.md``); constructed records
follow the grammar of the Torque ``qsub -l nodes`` documentation and PBS Pro's ``select``/``exec_vnode``
as OpenPBS writes them (``tests/data/pbs/openpbs-real/accounting-20261203.txt``). The hypothesis tests
generate records in every spelling and check ``cpus``/``gpus`` against the generator's values.
"""

from __future__ import annotations

import random
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hpcjobs.accounting.sources.pbs import read_pbs_accounting, read_qstat_json
from hpcjobs.accounting.sources.slurm import read_sacct_json, read_sacct_parsable2
from hpcjobs.accounting.sources.torque import read_torque_accounting, read_torque_qstat_xml
from hpcjobs.schedulers.pbs import formats as pbs

DATA = Path(__file__).resolve().parents[1] / "data"
_LINE = "04/05/2017 13:06:53;E;{job};user=u group=g jobname=x queue=q ctime=1491390300 qtime=1491390300 " \
        "etime=1491390300 start=1491390307 {res} end=1491390413 Exit_status=0 resources_used.cput=00:00:10 " \
        "resources_used.mem=1024kb resources_used.walltime=00:01:46"


def _one(df: pd.DataFrame) -> pd.Series:
    assert len(df) == 1
    return df.iloc[0]


# --------------------------------------------------------------------------- gpus: 0 when none was asked


def test_slurm_text_no_gres_is_zero_gpus_and_blank_tres_is_na() -> None:
    df = read_sacct_parsable2(
        "1|1|COMPLETED|billing=1,cpu=1,mem=100M,node=1|billing=1,cpu=1,mem=100M,node=1\n"
        "2|2|COMPLETED|billing=2,cpu=2,gres/gpu:a100=2,mem=1G,node=1|\n"
        "3|3|PENDING||billing=4,cpu=4,gres/gpu=1,node=1\n"
        "4|4|PENDING||\n", ["JobID", "JobIDRaw", "State", "AllocTRES", "ReqTRES"])
    assert df["gpus"].tolist()[:3] == [0, 2, 1]
    assert pd.isna(df["gpus"].iloc[3])
    assert df["gpus"].dtype == "Int64"


def test_slurm_testbed_capture_gpus() -> None:
    """The real testbed capture: only cap-gpu (job 10) asked for a GPU; every other job has 0."""
    text = (DATA / "slurm/testbed/sacct_X.txt").read_text()
    fields = (DATA / "slurm/testbed/sacct_header_X.txt").read_text().splitlines()[0].split("|")
    df = read_sacct_parsable2(text, fields)
    gpus = dict(zip(df["job_id"], df["gpus"], strict=True))
    assert gpus.pop("10") == 1
    assert set(gpus.values()) == {0}


def test_slurm_json_no_gres_is_zero_gpus() -> None:
    df = read_sacct_json((DATA / "slurm/testbed-22.05_sacct.json").read_text())
    jobs = df[df["step"].isna()]
    assert jobs["gpus"].notna().all()
    assert set(jobs["gpus"]) <= {0, 1} and 0 in set(jobs["gpus"])


def test_pbs_real_log_gpus_and_cpus() -> None:
    df = read_pbs_accounting(DATA / "pbs/openpbs-real/accounting-20261203.txt", tz="UTC")
    assert (df["gpus"] == 0).all()
    assert df["cpus"].notna().all()


@pytest.mark.parametrize(("res", "cpus", "gpus"), [
    ("exec_host=n1/0*2 exec_vnode=(n1:ncpus=2:ngpus=1:mem=4194304kb) Resource_List.ncpus=2 Resource_List.ngpus=1 "
     "Resource_List.select=1:ncpus=2:ngpus=1:mem=4gb", 2, 1),
    ("exec_host=n1/0*8+n2/0*8 exec_vnode=(n1:ncpus=8:ngpus=4)+(n2:ncpus=8:ngpus=4) Resource_List.ncpus=16 "
     "Resource_List.select=2:ncpus=8:ngpus=4", 16, 8),
    ("exec_host=n1/0*4 exec_vnode=(n1:ncpus=4) Resource_List.select=1:ncpus=4:gpus=2", 4, 2),
    ("exec_host=n1/0*4 exec_vnode=(n1:ncpus=4) Resource_List.select=1:ncpus=4:gpu=3", 4, 3),
    ("exec_host=n1/0 exec_vnode=(n1:ncpus=1) Resource_List.gpus=2 Resource_List.select=1:ncpus=1", 1, 2),
    ("exec_host=n1/0*4 exec_vnode=(vnA:ncpus=2+vnB:ncpus=2) Resource_List.ncpus=4 Resource_List.select=1:ncpus=4",
     4, 0),
    ("Resource_List.ncpus=1 Resource_List.nodes=1:ppn=28:gpus=1", 28, 1),
])
def test_pbs_pro_spellings(res: str, cpus: int, gpus: int) -> None:
    row = _one(read_pbs_accounting(_LINE.format(job="7.srv", res=res), tz="UTC"))
    assert (row["cpus"], row["gpus"]) == (cpus, gpus)


def test_pbs_record_without_resources_has_na_gpus() -> None:
    text = "04/05/2017 13:06:53;Q;8.srv;queue=q\n04/05/2017 13:07:00;D;8.srv;requestor=u@h\n"
    row = _one(read_pbs_accounting(text, tz="UTC"))
    assert pd.isna(row["gpus"]) and pd.isna(row["cpus"])


@pytest.mark.parametrize(("res", "cpus", "gpus"), [
    # a queue default ncpus=1 beside nodes=1:ppn=4 on four cores: a 4-CPU job
    ("exec_host=n1/0-3 Resource_List.ncpus=1 Resource_List.nodes=1:ppn=4 Resource_List.nodect=1", 4, 0),
    ("exec_host=n1/0-3+n2/0-3 Resource_List.nodes=2:gpu=2:ppn=4", 8, 4),
    ("exec_host=n1/0-3+n2/0-3 Resource_List.nodes=2:ppn=4:gpus=2", 8, 4),
    ("exec_host=n1/0-3+n2/0-3+n3/0 Resource_List.nodes=2:ppn=4:gpus=2+1:ppn=1", 9, 4),
    ("exec_host=n1/0,1 Resource_List.nodes=n1:ppn=2:gpus=1:bigmem", 2, 1),
    ("Resource_List.ncpus=1 Resource_List.nodes=1:ppn=4", 4, 0),  # not started: nodes x ppn
    ("Resource_List.procs=6", 6, 0),
])
def test_torque_spellings(res: str, cpus: int, gpus: int) -> None:
    row = _one(read_torque_accounting(_LINE.format(job="7.master", res=res), tz="UTC"))
    assert (row["cpus"], row["gpus"]) == (cpus, gpus)


def test_torque_recorded_captures() -> None:
    log = read_torque_accounting(DATA / "torque/constructed_accounting_20170405", tz="UTC").set_index("job_id")
    assert log.loc["47.master23.banette.gent.vsc", ["cpus", "gpus"]].tolist() == [28, 1]
    assert log.loc["45.master23.banette.gent.vsc", ["cpus", "gpus"]].tolist() == [4, 0]
    xml = read_torque_qstat_xml((DATA / "torque/fyrd_torque-stanford_qstat-x.xml").read_text())
    assert (xml["gpus"] == 0).all()  # a Resource_List without a GPU count: no GPUs
    parent = xml["job_id"] == "673175[].superserver.stanford.edu"  # names no CPU count, never ran
    assert xml.loc[~parent, "cpus"].tolist() == [1, 1, 1, 1, 1] and pd.isna(xml.loc[parent, "cpus"]).all()


def test_pbs_qstat_json_exec_vnode() -> None:
    df = read_qstat_json((DATA / "pbs/firecrest_openpbs-23.06.06_qstat-F-json-f-x_allusers.json").read_text())
    assert df["gpus"].notna().all() and (df["cpus"] >= 1).all()


# --------------------------------------------------------------------------- generated records (hypothesis)

_chunk = st.tuples(st.integers(1, 3), st.integers(1, 16), st.integers(0, 4), st.sampled_from(pbs.GPU_RESOURCES))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(chunks=st.lists(_chunk, min_size=1, max_size=3), started=st.booleans(), job_wide=st.booleans(),
       split_vnode=st.booleans(), seed=st.integers(0, 2**16))
def test_generated_pbs_pro_records(chunks: list[tuple[int, int, int, str]], started: bool, job_wide: bool,
                                   split_vnode: bool, seed: int) -> None:
    """``select`` chunks with GPUs spelled ``ngpus``/``gpus``/``gpu``, with and without the allocation."""
    rng = random.Random(seed)
    want_cpus = sum(n * c for n, c, _, _ in chunks)
    want_gpus = sum(n * g for n, _, g, _ in chunks)
    select = "+".join(f"{n}:ncpus={c}" + (f":{name}={g}" if g or rng.random() < 0.5 else "")
                      + rng.choice(["", ":mem=4gb", ":mpiprocs=2"]) for n, c, g, name in chunks)
    res = [f"Resource_List.select={select}"]
    if job_wide:  # the server's job-wide sums
        res += [f"Resource_List.ncpus={want_cpus}", f"Resource_List.ngpus={want_gpus}"]
    if started:
        hosts, vnodes, k = [], [], 0
        for n, c, g, name in chunks:
            for _ in range(n):
                k += 1
                hosts.append(f"n{k}/0*{c}" if c > 1 or rng.random() < 0.5 else f"n{k}/0")
                gres = f":{name}={g}" if g else ""
                if split_vnode and c > 1:  # one chunk over two vnodes of a host
                    vnodes.append(f"(n{k}a:ncpus={c - 1}{gres}+n{k}b:ncpus=1)")
                else:
                    vnodes.append(f"(n{k}:ncpus={c}{gres})")
        res += ["exec_host=" + "+".join(hosts), "exec_vnode=" + "+".join(vnodes)]
    rng.shuffle(res)
    row = _one(read_pbs_accounting(_LINE.format(job="12[3].srv-a.b", res=" ".join(res)), tz="UTC"))
    assert (row["cpus"], row["gpus"]) == (want_cpus, want_gpus)


_part = st.tuples(st.one_of(st.integers(1, 3), st.just("host")), st.one_of(st.none(), st.integers(1, 24)),
                  st.integers(0, 4), st.sampled_from(["gpus", "gpu"]), st.booleans())


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(parts=st.lists(_part, min_size=1, max_size=3), started=st.booleans(), default_ncpus=st.booleans(),
       slots=st.booleans(), host_style=st.sampled_from(["range", "plus", "comma"]), seed=st.integers(0, 2**16))
def test_generated_torque_records(parts: list[tuple[int | str, int | None, int, str, bool]], started: bool,
                                  default_ncpus: bool, slots: bool, host_style: str, seed: int) -> None:
    """``nodes`` specs joined by ``+``: counts or host names, ``ppn`` or not, ``gpus=``/``gpu=``, properties."""
    rng = random.Random(seed)
    specs, hosts, k = [], [], 0
    want_cpus = want_gpus = 0
    for i, (count, ppn, gpus, name, prop) in enumerate(parts):
        items = [f"ppn={ppn}"] if ppn is not None else []
        items += [f"{name}={gpus}"] if gpus or rng.random() < 0.3 else []
        items += ["bigmem"] if prop else []
        rng.shuffle(items)
        head = f"node{i}" if count == "host" else str(count)
        specs.append(":".join([head, *items]))
        n = 1 if count == "host" else int(count)
        want_cpus += n * (ppn or 1)
        want_gpus += n * gpus
        for _ in range(n):
            k += 1
            p = ppn or 1
            if host_style == "range":
                hosts.append(f"c{k}/0-{p - 1}" if p > 1 else f"c{k}/0")
            elif host_style == "plus":
                hosts += [f"c{k}/{j}" for j in range(p)]
            else:
                hosts.append(f"c{k}/" + ",".join(str(j) for j in range(p)))
    res = [f"Resource_List.nodes={'+'.join(specs)}", f"Resource_List.neednodes={'+'.join(specs)}"]
    res += ["Resource_List.ncpus=1"] if default_ncpus else []
    if started:
        res.append("exec_host=" + "+".join(hosts))
        res += [f"total_execution_slots={want_cpus}"] if slots else []
    rng.shuffle(res)
    row = _one(read_torque_accounting(_LINE.format(job="45.master", res=" ".join(res)), tz="UTC"))
    assert (row["cpus"], row["gpus"]) == (want_cpus, want_gpus)


# --------------------------------------------------------------------------- memory used and GPU usage (Slurm)


def test_two_task_step_memory_is_maxrss_times_ntasks() -> None:
    """Real capture (testbed, 2 tasks holding 150 MiB each): MaxRSS 162016K is one task's peak."""
    df = read_sacct_parsable2((DATA / "slurm/testbed-22.05_sacct-2task-step.txt").read_text(), None)
    job = df[df["step"].isna()].iloc[0]
    assert job["max_rss_bytes"] == 162016 * 1024
    assert job["mem_used_bytes"] == 2 * 162016 * 1024  # ≈ TRESUsageInTot mem=323896K, seff's figure
    from hpcjobs.accounting.reports.tables import efficiency
    assert efficiency(df)["mem_efficiency"].iloc[0] == pytest.approx(2 * 162016 / (1024 * 1024))


def test_memory_used_is_bounded_by_the_request() -> None:
    df = read_sacct_parsable2("1|1|100M|\n1.0|1.0||80M\n", ["JobID", "JobIDRaw", "ReqMem", "MaxRSS"])
    assert df["mem_used_bytes"].tolist() == [80 * 2**20, 80 * 2**20]  # no NTasks: MaxRSS itself
    df = read_sacct_parsable2("1|1|100M||\n1.0|1.0||80M|4\n", ["JobID", "JobIDRaw", "ReqMem", "MaxRSS", "NTasks"])
    assert df["mem_used_bytes"].tolist() == [100 * 2**20, 320 * 2**20]  # the job row at most its request


# TRESUsageInAve of a real job, published in ResearchComputing/Documentation pull request 498
# (docs/compute/monitoring-resources.md): one GPU, gres/gpuutil=100, gres/gpumem in bytes.
_CURC_AVE = ("cpu=00:56:24,energy=0,fs/disk=350130624578,gres/gpumem=40777023488,gres/gpuutil=100,"
             "mem=10621726720,pages=3465,vmem=10439041024")


def test_usage_tres_gpu_figures() -> None:
    text = (f"18194943|18194943|billing=8,cpu=8,gres/gpu=1,mem=32G,node=1||\n"
            f"18194943.batch|18194943.batch|cpu=8,gres/gpu=1,mem=32G,node=1|{_CURC_AVE}|{_CURC_AVE}\n"
            "18194944|18194944|billing=8,cpu=8,gres/gpu=4,node=1||\n"
            "18194944.0|18194944.0|cpu=8,gres/gpu=4,node=1|gres/gpuutil=396,mem=1G|gres/gpumem=20500736K\n")
    df = read_sacct_parsable2(text, ["JobID", "JobIDRaw", "AllocTRES", "TRESUsageInAve", "TRESUsageInMax"])
    jobs = df[df["step"].isna()].set_index("job_id")
    assert jobs.loc["18194943", "gpu_utilization"] == pytest.approx(1.0)
    assert jobs.loc["18194943", "gpu_mem_max_bytes"] == 40777023488
    assert jobs.loc["18194944", "gpu_utilization"] == pytest.approx(0.99)  # summed over 4 GPUs
    assert jobs.loc["18194944", "gpu_mem_max_bytes"] == 20500736 * 1024


# jobstats AdminComments (JS1: base64 of gzip of JSON) from the public tests of troycomi/reportseff
# (tests/test_reportseff.py, bad_gpu: 1 GPU, memory but no utilisation) and PrincetonUniversity/jobstats
# (README.md, job 39861033: no GPU).
_JS_GPU = ("JS1:H4sIAMMP3WMC/12NQQrDIBRE7/LXthj1q9/LhFAlFLSGRhdFvHuTphTS5TDz3jR4ZB9WcA18iHG6RC5n3GPJZYpjCik/X+CUIEXa"
           "CNIM6hr8rxi0sUSEKNgXKfcUwAmjub4Sg9tSN/3AYF7qeJY2kOAsbrxUSIL3Y3TyHxuDUiuJovf+f2Ok/WD7SX8DnGNK388AAAA=")
_JS_CPU = ("JS1:H4sIACj7KWIC/1XNQQrCMBCF4bvMOkonIzNpLyOhGUVIGmnSRSm5u1FEcPt/PN4BSw5aYDogaIz+tNoZF+R3qLn6eE2a8rrDxE"
           "5wvAgLsYGtaPiJFbRCxCMP5juqj6QdHJE79zg/t37hWvt34gEN3D9487FoewEKn+eojwAAAA==")


def test_jobstats_admin_comment() -> None:
    import base64
    import gzip
    import json

    from hpcjobs.accounting.sacct.usage import jobstats_summary
    assert jobstats_summary(_JS_GPU) == (None, 875364352)
    assert jobstats_summary(_JS_CPU) == (None, None)
    doc = {"nodes": {"a": {"gpu_utilization": {"0": 50.0, "1": 100.0}, "gpu_used_memory": {"0": 10, "1": 30}}},
           "total_time": 60, "gpus": 2}
    made = "JS1:" + base64.b64encode(gzip.compress(json.dumps(doc).encode())).decode()
    assert jobstats_summary(made) == (750_000, 30)
    assert jobstats_summary("JS1:not base64!") == (None, None)
    df = read_sacct_parsable2(f"45352405|45352405|{_JS_GPU}\n45352406|45352406|{made}\n45352407|45352407|Short\n",
                              ["JobID", "JobIDRaw", "AdminComment"])
    assert df["gpu_mem_max_bytes"].tolist()[:2] == [875364352, 30]
    assert pd.isna(df["gpu_utilization"].iloc[0]) and df["gpu_utilization"].iloc[1] == pytest.approx(0.75)
    assert df["gpu_utilization"].dtype == "Float64"
