"""Core-, GPU- and billing-hours; TRESBillingWeights as slurm.conf(5) describes them."""

from __future__ import annotations

import pytest

from hpcjobs.plan.billing import BillingWeightsError, parse_billing_weights, request_cost


def test_weights_of_the_slurm_conf_example() -> None:
    # slurm.conf(5), TRESBillingWeights: the example "CPU=1.0,Mem=0.25G,GRES/gpu=2.0"
    w = parse_billing_weights("CPU=1.0,Mem=0.25G,GRES/gpu=2.0")
    assert w == {"cpu": 1.0, "mem": 0.25 / 1024, "gres/gpu": 2.0}


def test_memory_weight_units_as_the_man_page_computes_them() -> None:
    # "a memory weight of mem=.25 on a job allocated 8GB will be billed 2048 (8192MB *.25) units.
    #  A memory weight of mem=.25G on the same job will be billed 2"
    eight_gb = 8 * 2**30
    per_mb = request_cost(nodes=1, cpus_per_node=0, gpus_per_node=0, memory_per_node=eight_gb, walltime_s=3600,
                          weights=parse_billing_weights("mem=.25"))
    per_gb = request_cost(nodes=1, cpus_per_node=0, gpus_per_node=0, memory_per_node=eight_gb, walltime_s=3600,
                          weights=parse_billing_weights("mem=.25G"))
    assert per_mb is not None and per_gb is not None
    assert per_mb.billing_hours == pytest.approx(2048) and per_gb.billing_hours == pytest.approx(2)


def test_cost_of_a_two_node_gpu_job() -> None:
    c = request_cost(nodes=2, cpus_per_node=8, gpus_per_node=4, memory_per_node=64 * 2**30, walltime_s=2 * 3600,
                     weights=parse_billing_weights("CPU=1.0,Mem=0.25G,GRES/gpu=2.0,GRES/gpu:a100=3"),
                     gpu_type="A100")
    assert c is not None
    assert (c.core_hours, c.gpu_hours) == (32.0, 16.0)
    # per hour: 16 CPUs x 1 + 128 GB x 0.25 + 8 GPUs x 2 + 8 a100 x 3 = 16 + 32 + 16 + 24 = 88
    assert c.billing_hours == pytest.approx(176.0) and c.billing_known


def test_without_weights_a_job_is_billed_its_cpus() -> None:
    c = request_cost(nodes=1, cpus_per_node=4, gpus_per_node=1, memory_per_node=None, walltime_s=1800)
    assert c is not None and (c.core_hours, c.gpu_hours, c.billing_hours, c.billing_known) == (2.0, 0.5, 2.0, False)
    assert request_cost(nodes=1, cpus_per_node=4, gpus_per_node=0, memory_per_node=None, walltime_s=None) is None


@pytest.mark.parametrize("text", ["CPU", "CPU=", "CPU=one", "=1", "Mem=0.25X"])
def test_bad_weights_are_refused_by_name(text: str) -> None:
    with pytest.raises(BillingWeightsError, match="not a TRES weight"):
        parse_billing_weights(text)


def test_site_schema_refuses_bad_weights() -> None:
    from pydantic import ValidationError

    from hpcjobs.config.site import Partition

    assert Partition(tres_billing_weights="CPU=0.5,Mem=0.083333333G,GRES/gpu=16.0").tres_billing_weights
    with pytest.raises(ValidationError, match="not a TRES weight"):
        Partition(tres_billing_weights="CPU=lots")


def test_site_discovery_records_the_partitions_billing_weights() -> None:
    """``scontrol show partition -o`` of the testbed (real) with a TRESBillingWeights field added to one line (the
    testbed sets none; the value is the slurm.conf(5) example), through ``site init``'s YAML and back."""
    from pathlib import Path

    from hpcjobs.config.site import SiteConfig
    from hpcjobs.config.validation import validate_document
    from hpcjobs.config.yamlio import parse_yaml
    from hpcjobs.schedulers.slurm.discover import build_slurm_site
    from hpcjobs.sites.discover import site_yaml

    testbed = Path(__file__).resolve().parents[1] / "data" / "slurm" / "testbed"
    lines = (testbed / "scontrol_show_partition_oneliner.txt").read_text().splitlines()
    lines[1] += " TRESBillingWeights=CPU=1.0,Mem=0.25G,GRES/gpu=2.0"
    found = build_slurm_site((testbed / "scontrol_show_config.txt").read_text(), "\n".join(lines) + "\n",
                             (testbed / "scontrol_show_node_oneliner.txt").read_text())
    text = site_yaml(found)
    assert "# scontrol show partition -o: TRESBillingWeights" in text
    site = validate_document(SiteConfig, parse_yaml(text))
    assert site.partitions["gpu"].tres_billing_weights == "CPU=1.0,Mem=0.25G,GRES/gpu=2.0"
    assert site.partitions["debug"].tres_billing_weights is None
