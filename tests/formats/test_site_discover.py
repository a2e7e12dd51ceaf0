"""Site discovery parsers on recorded real output (Slurm testbed, OpenPBS server) and odd spellings."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hpcjobs.config.site import SiteConfig
from hpcjobs.config.validation import validate_document
from hpcjobs.config.yamlio import parse_yaml
from hpcjobs.schedulers.pbs.discover import build_pbs_site, generic_user_limit, pbs_memory, pbs_walltime
from hpcjobs.schedulers.pbs.formats import parse_qstat_json
from hpcjobs.schedulers.slurm.discover import (
    build_slurm_site,
    parse_gres,
    parse_oneliner,
    slurm_count,
    slurm_megabytes,
    slurm_time,
)
from hpcjobs.sites.diff import diff_site
from hpcjobs.sites.discover import site_yaml

DATA = Path(__file__).resolve().parent.parent / "data"
SLURM = DATA / "slurm" / "testbed"
PBS = DATA / "pbs" / "openpbs-real" / "site"


def _slurm_site(partition_text: str | None = None, node_text: str | None = None, **kw: object) -> SiteConfig:
    found = build_slurm_site((SLURM / "scontrol_show_config.txt").read_text(),
                             partition_text or (SLURM / "scontrol_show_partition_oneliner.txt").read_text(),
                             node_text or (SLURM / "scontrol_show_node_oneliner.txt").read_text(), **kw)
    return validate_document(SiteConfig, parse_yaml(site_yaml(found)))


def test_testbed_capture_gives_the_testbed_site() -> None:
    site = _slurm_site()
    assert (site.name, site.scheduler, site.detect.cluster_names) == ("hpctest", "slurm", ["hpctest"])
    assert site.default_partition == "debug" and list(site.partitions) == ["debug", "gpu"]
    assert site.limits.max_array_size == 101 and site.limits.max_submitted_jobs is None
    gpu = site.partitions["gpu"]
    assert (gpu.max_walltime, gpu.default_walltime, gpu.max_nodes, gpu.cpus_per_node) == (3600, None, 1, 8)
    assert (gpu.memory_per_node, gpu.default_memory_per_cpu) == (8 * 1024**3, 256 * 1024**2)
    assert (gpu.gpus_per_node, gpu.gpu_types) == (2, [])


def test_heterogeneous_partition_gets_a_common_entry_and_one_per_node_class() -> None:
    part = ("PartitionName=gpu Default=YES MaxTime=2-00:00:00 DefaultTime=1:00:00 MaxNodes=UNLIMITED "
            "TotalNodes=3 State=UP AllowQos=ALL MaxMemPerNode=UNLIMITED\n")
    nodes = ("NodeName=a1 CPUTot=64 CPUEfctv=62 RealMemory=256000 MemSpecLimit=4000 Gres=gpu:a100:4(S:0-1) "
             "Partitions=gpu\n"
             "NodeName=a2 CPUTot=64 CPUEfctv=62 RealMemory=256000 MemSpecLimit=4000 Gres=gpu:a100:4(S:0-1) "
             "Partitions=gpu\n"
             "NodeName=v1 CPUTot=32 RealMemory=192000 Gres=gpu:v100:2,shard:8 OS=Linux 6.1 #1 SMP Partitions=gpu\n")
    site = _slurm_site(part, nodes)
    assert list(site.partitions) == ["gpu", "gpu-v100", "gpu-a100"]
    common, v100, a100 = site.partitions.values()
    assert (common.cpus_per_node, common.memory_per_node, common.gpus_per_node) == (32, 192000 * 1024**2, 2)
    assert (common.max_walltime, common.default_walltime, common.max_nodes) == (172800, 3600, 3)
    assert (a100.scheduler_name, a100.cpus_per_node, a100.gpus_per_node, a100.gpu_types) == ("gpu", 62, 4, ["a100"])
    assert a100.memory_per_node == 252000 * 1024**2  # RealMemory - MemSpecLimit
    assert (v100.scheduler_name, v100.gpu_types) == ("gpu", ["v100"])


def test_max_mem_per_node_caps_memory_and_exclusive_and_qos_are_read() -> None:
    part = ("PartitionName=big MaxTime=INFINITE DefaultTime=NONE MaxNodes=4 TotalNodes=8 State=DOWN "
            "AllowQos=normal,long OverSubscribe=EXCLUSIVE MaxMemPerNode=4096 DefMemPerCPU=512\n")
    nodes = "NodeName=n1 CPUTot=16 RealMemory=8192 Gres=(null) Partitions=big\n"
    site = _slurm_site(part, nodes)
    big = site.partitions["big"]
    assert (big.max_walltime, big.max_nodes, big.memory_per_node) == (None, 4, 4096 * 1024**2)
    assert (big.qos, big.exclusive, big.gpus_per_node, big.default_memory_per_cpu) == (
        ["normal", "long"], True, 0, 512 * 1024**2)
    assert big.description == "State=DOWN at discovery"


def test_every_written_value_names_its_source() -> None:
    found = build_slurm_site((SLURM / "scontrol_show_config.txt").read_text(),
                             (SLURM / "scontrol_show_partition_oneliner.txt").read_text(),
                             (SLURM / "scontrol_show_node_oneliner.txt").read_text())
    body = [ln for ln in site_yaml(found).splitlines()
            if ln.startswith(("  ", "default_partition")) and ":" in ln and not ln.rstrip().endswith(":")
            and not ln.lstrip().startswith("#") and "cluster_names" not in ln]
    assert body and all("  # " in ln for ln in body)


@pytest.mark.parametrize(("text", "seconds"), [
    ("UNLIMITED", None), ("INFINITE", None), ("NONE", None), ("1-00:00:00", 86400), ("01:00:00", 3600),
    ("30", 1800), ("2-12", 216000), ("0:30", 30)])
def test_slurm_time_spellings(text: str, seconds: int | None) -> None:
    assert slurm_time(text) == seconds


@pytest.mark.parametrize(("text", "types", "usable"), [
    ("gpu:2", [], 2), ("gpu:a100:4(S:0-1)", ["a100"], 4), ("gpu:a100:2,gpu:v100:1", ["a100", "v100"], 1),
    ("(null)", [], 0), ("shard:8,mps:100", [], 0), ("gpu:tesla:2(S:0,1),mps:200", ["tesla"], 2), ("gpu:4", [], 4)])
def test_gres_spellings(text: str, types: list[str], usable: int) -> None:
    gres = parse_gres(text)
    assert (gres.types, gres.usable) == (types, usable)


@given(st.integers(0, 30), st.integers(0, 23), st.integers(0, 59), st.integers(0, 59))
def test_slurm_time_reads_every_d_hh_mm_ss(d: int, h: int, m: int, s: int) -> None:
    total = ((d * 24 + h) * 60 + m) * 60 + s
    text = f"{d}-{h:02d}:{m:02d}:{s:02d}" if d else f"{h:02d}:{m:02d}:{s:02d}"
    if total:
        assert slurm_time(text) == total
    else:
        with pytest.raises(ValueError):
            slurm_time(text)  # a zero limit is no wall time


@given(st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789", min_size=1, max_size=8).filter(
    lambda t: not t.isdigit()), st.integers(1, 16), st.sampled_from(["", "(S:0)", "(S:0-1)"]))
def test_typed_gres_any_name(gtype: str, count: int, socket: str) -> None:
    gres = parse_gres(f"gpu:{gtype}:{count}{socket}")
    assert (gres.types, gres.total) == ([gtype], count)


@given(st.sampled_from(["UNLIMITED", "INFINITE", "NONE", "N/A", "(null)", "", "0"]))
def test_no_limit_spellings_are_none(text: str) -> None:
    assert slurm_count(text) is None and slurm_megabytes(text) is None


@given(st.integers(1, 10**6))
def test_oneliner_keeps_values_with_spaces(n: int) -> None:
    rec = parse_oneliner(f"NodeName=x OS=Linux 6.1 #1 SMP RealMemory={n} Reason=down by admin [root@now]")
    assert rec["OS"] == "Linux 6.1 #1 SMP" and rec["RealMemory"] == str(n)
    assert rec["Reason"] == "down by admin [root@now]"


# PBS


def _pbs(name: str) -> dict:
    return parse_qstat_json((PBS / name).read_text())


def test_openpbs_capture_gives_the_server_site() -> None:
    found = build_pbs_site(_pbs("qstat-Q-f-F-json.json"), _pbs("pbsnodes-a-F-json.json"), _pbs("qstat-B-f-F-json.json"))
    site = validate_document(SiteConfig, parse_yaml(site_yaml(found)))
    assert (site.name, site.scheduler, site.detect.cluster_names, site.default_partition) == (
        "vm", "pbspro", ["vm"], "workq")
    workq = site.partitions["workq"]
    assert (workq.max_walltime, workq.default_walltime, workq.max_nodes) == (7200, None, 1)
    assert (workq.cpus_per_node, workq.gpus_per_node, workq.memory_per_node) == (2, 2, 24683792 * 1024)
    assert site.limits.max_array_size == 20 and site.limits.max_submitted_jobs is None
    assert diff_site(site, found) == []


def test_public_firecrest_queue_sample_without_limits() -> None:
    queues = parse_qstat_json((DATA / "pbs" / "firecrest_openpbs-23.06.06_qstat-F-json-f-Q.json").read_text())
    found = build_pbs_site(queues, {"nodes": {}}, {})
    site = validate_document(SiteConfig, parse_yaml(site_yaml(found)))
    assert site.name == "pbs" and site.partitions["workq"].max_walltime is None
    assert any("max_walltime: left out" in n for n in found.partition("workq").notes)  # type: ignore[union-attr]


def test_pbs_route_queue_and_user_limits() -> None:
    queues = {"pbs_server": "s", "Queue": {
        "route": {"queue_type": "Route", "route_destinations": "short,long", "enabled": "True"},
        "long": {"queue_type": "Execution", "enabled": "True",
                 "resources_max": {"walltime": "72:00:00", "mem": "0", "ngpus": 1},
                 "resources_default": {"walltime": "01:00:00"}},
        "off": {"queue_type": "Execution", "enabled": "False"}}}
    nodes = {"nodes": {"g1": {"queue": "long", "resources_available": {"ncpus": 48, "mem": "500gb", "ngpus": 4,
                                                                          "gpu_type": "a100"}}}}
    server = {"Server": {"s": {"default_queue": "route", "max_queued": "[u:PBS_GENERIC=300]"}}}
    site = validate_document(SiteConfig, parse_yaml(site_yaml(build_pbs_site(queues, nodes, server))))
    assert list(site.partitions) == ["route", "long"] and site.default_partition == "route"
    long = site.partitions["long"]
    assert (long.max_walltime, long.default_walltime, long.cpus_per_node) == (259200, 3600, 48)
    assert (long.memory_per_node, long.gpus_per_node, long.gpu_types) == (500 * 1024**3, 1, ["a100"])
    assert site.limits.max_submitted_jobs == 300


@pytest.mark.parametrize(("text", "nbytes"), [("24683792kb", 24683792 * 1024), ("16gb", 16 * 1024**3),
                                             ("0", None), ("mem=0", None), (None, None), ("100", 100),
                                             ("2w", 16)])
def test_pbs_memory_spellings(text: str | None, nbytes: int | None) -> None:
    assert pbs_memory(text) == nbytes


@given(st.integers(0, 500), st.integers(0, 59), st.integers(0, 59))
def test_pbs_walltime_hours_past_24(h: int, m: int, s: int) -> None:
    total = (h * 60 + m) * 60 + s
    assert pbs_walltime(f"{h:02d}:{m:02d}:{s:02d}") == (total or None)
    assert generic_user_limit(f"[u:PBS_GENERIC={h}]") == (h or None)


def test_features_memory_not_consumable_and_maxjobcount_are_noted() -> None:
    config = (SLURM / "scontrol_show_config.txt").read_text().replace("CR_CORE_MEMORY", "CR_CORE")
    part = "PartitionName=p Default=YES MaxTime=1:00:00 MaxNodes=2 State=UP\n"
    nodes = ("NodeName=a CPUTot=4 RealMemory=4000 AvailableFeatures=ib,skylake Partitions=p\n"
             "NodeName=b CPUTot=4 RealMemory=4000 AvailableFeatures=(null) Partitions=p\n")
    found = build_slurm_site(config, part, nodes)
    text = site_yaml(found)
    assert "# node features ib, skylake (scontrol show node -o: AvailableFeatures)" in text
    assert "SelectTypeParameters=CR_CORE (scontrol show config): memory is not a consumable resource" in text
    assert "# MaxJobCount=10000 (scontrol show config): jobs of all users together" in text
    assert "SelectTypeParameters" not in site_yaml(build_slurm_site((SLURM / "scontrol_show_config.txt").read_text(),
                                                                    part, nodes))


def test_pbs_queue_with_mixed_nodes_gets_one_entry_per_node_class() -> None:
    queues = {"pbs_server": "s", "Queue": {"gpu": {"queue_type": "Execution", "enabled": "True",
                                                  "resources_max": {"walltime": "24:00:00"}}}}

    def node(ncpus: int, mem: str, ngpus: int = 0, gtype: str | None = None) -> dict:
        avail: dict = {"ncpus": ncpus, "mem": mem, "ngpus": ngpus}
        if gtype:
            avail["gpu_type"] = gtype
        return {"queue": "gpu", "resources_available": avail}

    nodes = {"nodes": {"a1": node(64, "515000000kb", 4, "a100"), "a2": node(64, "514999000kb", 4, "a100"),
                       "v1": node(32, "192gb", 2, "v100")}}
    site = validate_document(SiteConfig, parse_yaml(site_yaml(build_pbs_site(queues, nodes, {}))))
    assert list(site.partitions) == ["gpu", "gpu-v100", "gpu-a100"]
    common, v100, a100 = site.partitions.values()
    assert (common.cpus_per_node, common.gpus_per_node, common.memory_per_node) == (32, 2, 192 * 1024**3)
    assert (a100.scheduler_name, a100.cpus_per_node, a100.gpus_per_node, a100.gpu_types) == ("gpu", 64, 4, ["a100"])
    assert (a100.max_nodes, a100.memory_per_node, a100.max_walltime) == (2, 514999000 * 1024, 86400)
    assert (v100.scheduler_name, v100.max_nodes, v100.gpu_types) == ("gpu", 1, ["v100"])
