"""Torque site discovery parsers on real public Torque output (tests/data/torque/discover) and odd spellings."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hpcjobs.config.experiment import Experiment
from hpcjobs.config.site import SiteConfig
from hpcjobs.config.validation import validate_document
from hpcjobs.config.yamlio import parse_yaml
from hpcjobs.render.script import render_job
from hpcjobs.resolve import resolve
from hpcjobs.schedulers.pbs.discover_torque import (
    build_torque_site,
    needed_properties,
    node_unusable,
    parse_node_status,
    parse_pbsnodes,
    parse_status_blocks,
    parse_torque_version,
    torque_node_count,
    torque_walltime,
)
from hpcjobs.sites.diff import diff_site
from hpcjobs.sites.discover import site_yaml

DATA = Path(__file__).resolve().parents[1] / "data" / "torque" / "discover"
KISTI_Q = (DATA / "kisti-gsdc_torque-6.1.2_qstat-Qf.txt").read_text()
KISTI_N = (DATA / "kisti-gsdc_torque-6.1.2_pbsnodes-a_excerpt.txt").read_text()
SERVER = (DATA / "constructed_torque-6_qstat-B-f.txt").read_text()
ARC = {k: (DATA / f"arc_torque-2.3.7_{k}.txt").read_text() for k in ("qstat-Q-f", "pbsnodes-a", "qmgr-c-list-server")}
GIB = 1024**3


def prt_attr(name: str, value: str, linesize: int = 77) -> str:
    """Mirror of Torque's ``src/cmds/qstat.c`` ``prt_attr``: split on ',', wrap with '\\n\\t', break long tokens."""
    out = [f"    {name} = "]
    start = len(name) + 7
    tokens = [t for t in value.split(",") if t]
    for i, tok in enumerate(tokens):
        if len(tok) + start < linesize:
            out.append(tok)
            start += len(tok)
        else:
            if i:
                out.append("\n\t")
                start = 9
            for ch in tok:
                out.append(ch)
                start += 1
                if start > linesize:
                    start = 8
                    out.append("\n\t")
        if i + 1 < len(tokens):
            out.append(",")
    return "".join(out)


def _site(queue_text: str, node_text: str, server_text: str = SERVER) -> SiteConfig:
    return validate_document(SiteConfig, parse_yaml(site_yaml(build_torque_site(queue_text, node_text, server_text))))


# real samples, field by field


def test_kisti_queue_text_fields() -> None:
    queues = parse_status_blocks(KISTI_Q)
    assert list(queues) == ["cpuQ", "gpuQ"]
    gpu = queues["gpuQ"]
    assert (gpu["queue_type"], gpu["resources_default.neednodes"], gpu["resources_default.nodes"]) == (
        "Execution", "gpuQ", "1")
    assert (gpu["acl_groups"], gpu["enabled"], gpu["started"], gpu["mtime"]) == (
        "tem_users", "True", "True", "1610553300")
    assert gpu["state_count"] == "Transit:0 Queued:0 Held:0 Waiting:0 Running:0 Exiting:0 Complete:0"


def test_kisti_pbsnodes_fields() -> None:
    nodes = parse_pbsnodes(KISTI_N)
    assert len(nodes) == 7
    wn9 = nodes["tem-wn1009-el7.sdfarm.kr"]
    assert (wn9["state"], wn9["np"], wn9["properties"], wn9["ntype"]) == ("job-exclusive", "28", "cpuQ", "cluster")
    assert wn9["jobs"] == "0-13/307.tem-ce-el7.sdfarm.kr,14-27/308.tem-ce-el7.sdfarm.kr"
    status = parse_node_status(wn9["status"])
    assert (status["physmem"], status["totmem"], status["ncpus"], status["version"]) == (
        "197821660kb", "204113112kb", "28", "6.1.2")
    assert status["uname"].endswith("#1 SMP Tue Dec 15 08:51:23 CST 2020 x86_64")
    assert status["sessions"] == "1637 21403 21462" and status["varattr"] == ""
    gpu6 = nodes["tem-gpu06-el7.sdfarm.kr"]
    assert (gpu6["np"], gpu6["gpus"], gpu6["properties"]) == ("32", "2", "gpuQ,gpuQA100")
    assert "gpu_product_name=NVIDIA A100-PCIE-40GB" in gpu6["gpu_status"]
    assert nodes["tem-gpu10-el7.sdfarm.kr"]["gpus"] == "4"


def test_kisti_site_has_a_common_entry_and_one_per_node_class() -> None:
    site = _site(KISTI_Q, KISTI_N)
    assert (site.name, site.scheduler, site.detect.cluster_names) == (
        "torque-head.example.org", "torque", ["torque-head.example.org"])
    assert site.default_partition == "cpuQ"
    assert (site.limits.max_array_size, site.limits.max_submitted_jobs) == (1000, 2000)
    assert list(site.partitions) == [
        "cpuQ", "cpuQ-c28", "cpuQ-c36", "gpuQ", "gpuQ-c28-g2", "gpuQ-c32-g2", "gpuQ-c32-g4"]
    cpu, gpu = site.partitions["cpuQ"], site.partitions["gpuQ"]
    assert (cpu.max_nodes, cpu.cpus_per_node, cpu.memory_per_node, cpu.gpus_per_node) == (3, 28, 197821660 * 1024, 0)
    assert (gpu.max_nodes, gpu.cpus_per_node, gpu.memory_per_node, gpu.gpus_per_node) == (4, 28, 131440740 * 1024, 2)
    assert (cpu.max_walltime, cpu.default_walltime, gpu.gpu_types) == (None, None, [])
    c36 = site.partitions["cpuQ-c36"]
    assert (c36.scheduler_name, c36.max_nodes, c36.cpus_per_node, c36.memory_per_node) == (
        "cpuQ", 1, 36, 394636200 * 1024)
    g4 = site.partitions["gpuQ-c32-g4"]
    assert (g4.scheduler_name, g4.cpus_per_node, g4.gpus_per_node, g4.memory_per_node) == (
        "gpuQ", 32, 4, 395273932 * 1024)
    g28 = site.partitions["gpuQ-c28-g2"]  # a P100 node and a P40 node: the smaller memory
    assert (g28.max_nodes, g28.memory_per_node) == (2, 131440740 * 1024)


def test_kisti_yaml_names_every_source_and_the_gpu_models_it_leaves_out() -> None:
    text = site_yaml(build_torque_site(KISTI_Q, KISTI_N, SERVER))
    assert 'default_partition: "cpuQ"  # qstat -B -f: default_queue' in text
    assert "max_array_size: 1000  # qstat -B -f: max_job_array_size=1000" in text
    assert "cpus_per_node: 36  # pbsnodes -a: np (1 node(s))" in text
    assert "gpus_per_node: 4  # pbsnodes -a: gpus" in text
    assert "# nodes: those with qstat -Q -f: resources_default.neednodes=gpuQ (4 found)" in text
    assert "Tesla P100-PCIE-16GB" in text and "gpu_types: left out" in text
    body = [ln for ln in text.splitlines() if ln.startswith("    ") and not ln.lstrip().startswith("#")]
    assert body and all("  # " in ln for ln in body)


def test_kisti_site_renders_nodes_ppn_gpus_on_the_class_that_fits() -> None:
    site = _site(KISTI_Q, KISTI_N)
    exp = Experiment.model_validate({"name": "t", "command": "nvidia-smi", "partition": None,
                                     "resources": {"gpus_per_node": 4, "cpus_per_task": 8, "walltime": "02:00:00"}})
    job = resolve(exp, site)
    assert job.partition == "gpuQ-c32-g4"
    text = render_job(job).text
    assert "#PBS -q gpuQ" in text and "#PBS -l nodes=1:ppn=8:gpus=4" in text and "#PBS -l walltime=02:00:00" in text


def test_kisti_site_diff_is_clean_against_its_own_discovery() -> None:
    found = build_torque_site(KISTI_Q, KISTI_N, SERVER)
    assert diff_site(_site(KISTI_Q, KISTI_N), found) == []
    edited = _site(KISTI_Q, KISTI_N).model_copy(deep=True)
    edited.partitions["gpuQ"] = edited.partitions["gpuQ"].model_copy(update={"gpus_per_node": 4})
    edited.partitions["gpuQ"].model_fields_set.add("gpus_per_node")
    assert diff_site(edited, found) == ["partition gpuQ: gpus_per_node 4 in the file, 2 on the cluster"]


def test_arc_torque_2_3_7_server_queue_and_node() -> None:
    server = parse_status_blocks(ARC["qmgr-c-list-server"])
    assert list(server) == ["head.domain.com"]
    attrs = server["head.domain.com"]
    assert (attrs["pbs_version"], attrs["scheduler_iteration"], attrs["net_counter"]) == ("2.3.7", "600", "10 3 1")
    assert attrs["state_count"] == "Transit:0 Queued:0 Held:0 Waiting:0 Running:0 Exiting:0"
    queue = parse_status_blocks(ARC["qstat-Q-f"])["queue1"]
    assert (queue["max_running"], queue["resources_assigned.ncpus"], queue["started"]) == ("10", "0", "True")
    site = _site(ARC["qstat-Q-f"], ARC["pbsnodes-a"], ARC["qmgr-c-list-server"])
    assert (site.name, list(site.partitions), site.default_partition) == ("head.domain.com", ["queue1"], None)
    q1 = site.partitions["queue1"]
    assert (q1.max_nodes, q1.cpus_per_node, q1.memory_per_node, q1.gpus_per_node) == (1, 2, 1025836 * 1024, 0)
    assert site.limits.max_array_size is None and site.limits.max_submitted_jobs is None


def test_buildtest_queue_sample_default_walltime_without_nodes() -> None:
    found = build_torque_site((DATA / "buildtest_torque_qstat-Qf.txt").read_text(), "", SERVER)
    site = validate_document(SiteConfig, parse_yaml(site_yaml(found)))
    part = site.partitions["lbl-cluster"]
    assert (part.default_walltime, part.max_walltime, part.cpus_per_node) == (86400, None, None)
    assert any("pbsnodes -a lists no node" in n for n in found.partition("lbl-cluster").notes)  # type: ignore[union-attr]
    assert site.default_partition is None  # the server's default queue cpuQ is not among these queues


@pytest.mark.parametrize(("text", "version"), [
    ((DATA / "buildtest_torque-7.0.1_qsub--version.stderr.txt").read_text(), "7.0.1"),
    ("version: 2.5.12\n", "2.5.12"),
    ("pbs_version = 23.06.06\n", None),  # OpenPBS's qstat --version
    ("Unknown option: version\nUsage:\n    qstat [-f] [-a|-i|-r] [-n [-1]] [-G|-M] [-u user_list]\n", None),
    ("", None)])
def test_torque_version_is_told_from_openpbs_and_slurm_wrappers(text: str, version: str | None) -> None:
    assert parse_torque_version(text) == version


# odd spellings


def test_wrapped_server_attributes_are_joined() -> None:
    attrs = parse_status_blocks(SERVER)["torque-head.example.org"]
    assert attrs["acl_hosts"] == "torque-head.example.org,login1.example.org,login2.example.org,login3.example.org"
    assert attrs["state_count"] == "Transit:0 Queued:0 Held:0 Waiting:0 Running:12 Exiting:0 Complete:0"
    assert attrs["pbs_version"] == "6.1.2"


@given(st.lists(st.text(alphabet="abcdefghij0123456789@.-_", min_size=1, max_size=40), min_size=1, max_size=6),
       st.sampled_from(["acl_groups", "resources_default.neednodes", "route_destinations"]))
def test_prt_attr_wrapping_round_trips(tokens: list[str], name: str) -> None:
    value = ",".join(tokens)
    text = "Queue: q\n" + prt_attr(name, value) + "\n" + prt_attr("enabled", "True") + "\n\n"
    assert parse_status_blocks(text)["q"] == {name: value, "enabled": "True"}


@pytest.mark.parametrize(("text", "seconds"), [
    ("72:00:00", 259200), ("1:00:00:00", 86400), ("2:12:00:00", 216000), ("3600", 3600), ("30:00", 1800),
    ("00:00:30.5", 30), ("UNLIMITED", None), ("0", None), ("00:00:00", None), ("", None), ("1-00:00:00", None),
    ("abc", None), (None, None)])
def test_torque_walltime_spellings(text: str | None, seconds: int | None) -> None:
    assert torque_walltime(text) == seconds


@given(st.integers(0, 30), st.integers(0, 23), st.integers(0, 59), st.integers(0, 59))
def test_torque_walltime_day_form(d: int, h: int, m: int, s: int) -> None:
    total = ((d * 24 + h) * 60 + m) * 60 + s
    assert torque_walltime(f"{d}:{h:02d}:{m:02d}:{s:02d}") == (total or None)
    assert torque_walltime(f"{d * 24 + h}:{m:02d}:{s:02d}") == (total or None)


@pytest.mark.parametrize(("spec", "count", "props"), [
    ("4", 4, []), ("4:ppn=8", 4, []), ("2:gpus=1+1:ppn=4", 3, []), ("gpuQ", None, ["gpuQ"]),
    ("1:ppn=4:gpu:fast", 1, ["gpu", "fast"]), ("", None, [])])
def test_node_specs(spec: str, count: int | None, props: list[str]) -> None:
    assert torque_node_count(spec) == count and needed_properties(spec) == props


QUEUE = ("Queue: batch\n    queue_type = Execution\n{extra}    enabled = True\n    started = True\n\n"
         "Queue: off\n    queue_type = Execution\n    enabled = False\n    started = True\n\n"
         "Queue: route\n    queue_type = Route\n    route_destinations = batch\n    enabled = True\n\n")
NODE = "n{i}\n     state = {state}\n     np = {np}\n     ntype = cluster\n{status}{gpus}\n"


def _node(i: int, state: str = "free", np: int = 16, mem: str | None = "64gb", gpus: int | None = None) -> str:
    status = f"     status = opsys=linux,physmem={mem},ncpus={np}\n" if mem is not None else ""
    return NODE.format(i=i, state=state, np=np, status=status, gpus=f"     gpus = {gpus}\n" if gpus is not None else "")


@given(st.sampled_from(["0", "UNLIMITED", "100gb", "8gb"]), st.sampled_from(["72:00:00", "1:00:00:00", "0", None]),
       st.integers(0, 4), st.sampled_from(["down", "offline", "down,offline", "state-unknown,down"]))
def test_queue_limits_odd_spellings(mem: str, wall: str | None, gpus: int, bad_state: str) -> None:
    extra = f"    resources_max.mem = {mem}\n" + (f"    resources_max.walltime = {wall}\n" if wall else "")
    nodes = _node(1, gpus=gpus) + _node(2, state=bad_state, np=4, mem="1gb") + _node(3, mem=None, gpus=gpus)
    found = build_torque_site(QUEUE.format(extra=extra), nodes, "Server: s\n    default_queue = batch\n")
    site = validate_document(SiteConfig, parse_yaml(site_yaml(found)))
    assert list(site.partitions) == ["batch", "route"] and site.default_partition == "batch"
    batch = site.partitions["batch"]
    assert batch.max_walltime == torque_walltime(wall)
    assert (batch.max_nodes, batch.cpus_per_node, batch.gpus_per_node) == (2, 16, gpus)  # n2 is down: left out
    cap = {"100gb": 100 * GIB, "8gb": 8 * GIB}.get(mem)
    assert batch.memory_per_node == cap  # n3 reports no physmem: only the queue's cap is known
    notes = " ".join(found.partition("batch").notes)  # type: ignore[union-attr]
    assert "down or offline at discovery: n2" in notes
    assert cap or "memory_per_node: left out, not every node reports physmem" in notes
    assert any("queue off: left out, enabled=False" in n for n in found.notes)
    assert site.partitions["route"].description == "route queue to batch"


def test_only_down_nodes_still_give_the_limits() -> None:
    found = build_torque_site(QUEUE.format(extra=""), _node(1, state="down", gpus=0), "")
    site = validate_document(SiteConfig, parse_yaml(site_yaml(found)))
    batch = site.partitions["batch"]
    assert (site.name, batch.cpus_per_node, batch.gpus_per_node) == ("torque", 16, 0)
    assert node_unusable({"state": "down,offline"}) and not node_unusable({"state": "job-exclusive"})


def test_neednodes_maps_a_queue_to_the_nodes_with_that_property() -> None:
    queue = "Queue: gpu\n    queue_type = Execution\n    resources_default.neednodes = 1:gpu\n\n"
    nodes = (_node(1, gpus=2).replace("ntype", "properties = gpu,a100\n     ntype") + _node(2, np=64))
    site = _site(queue, nodes, "")
    assert (site.partitions["gpu"].max_nodes, site.partitions["gpu"].cpus_per_node) == (1, 16)
    assert site.partitions["gpu"].gpus_per_node == 2


def test_default_walltime_above_max_is_left_out() -> None:
    extra = "    resources_max.walltime = 01:00:00\n    resources_default.walltime = 02:00:00\n"
    found = build_torque_site(QUEUE.format(extra=extra), _node(1), "")
    part = found.partition("batch")
    assert part is not None and "default_walltime" not in part.fields
    assert part.fields["max_walltime"].value == "01:00:00"
