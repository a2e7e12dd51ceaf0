"""``hpcjobs site init --scheduler pbspro`` and ``site diff`` on the real OpenPBS server, checked against qmgr."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from hpcjobs.cli import main
from hpcjobs.config.sites import load_site_file
from hpcjobs.units import parse_walltime

from .real import PbsServer, pbs

pytestmark = pytest.mark.pbs


def _qmgr_attrs(command: str) -> dict[str, str]:
    """``qmgr -c "list ..."`` text as ``{attribute: value}`` (read independently of hpcjobs' JSON parsers)."""
    text = pbs(["qmgr", "-c", command]).stdout
    return dict(re.findall(r"^\s+(\S+) = (.*)$", text, flags=re.MULTILINE))


def test_site_init_from_openpbs_matches_qmgr(pbs_server: PbsServer, tmp_path: Path) -> None:
    out = tmp_path / "pbs.yaml"
    runner = CliRunner()
    result = runner.invoke(main, ["site", "init", "--scheduler", "pbspro", "-o", str(out)])
    assert result.exit_code == 0, result.output
    site = load_site_file(out)
    server = _qmgr_attrs("list server")
    assert site.scheduler == "pbspro" and site.detect.cluster_names == [pbs_server.server_name()]
    assert site.default_partition == server["default_queue"]
    assert site.limits.max_array_size == int(server["max_array_size"])
    queue = _qmgr_attrs(f"list queue {server['default_queue']}")
    entry = site.partitions[server["default_queue"]]
    assert entry.max_walltime == parse_walltime(queue["resources_max.walltime"])
    assert entry.cpus_per_node == int(queue["resources_max.ncpus"])  # below the node's ncpus or equal
    node = _qmgr_attrs("list node @default")
    assert entry.gpus_per_node == int(node["resources_available.ngpus"])
    assert "# qstat -Q -f -F json: resources_max.walltime" in out.read_text()

    validate = runner.invoke(main, ["site", "validate", str(out)])
    assert validate.exit_code == 0, validate.output
    clean = runner.invoke(main, ["site", "diff", str(out)])
    assert clean.exit_code == 0, clean.output
    out.write_text(out.read_text().replace(f"max_array_size: {server['max_array_size']}", "max_array_size: 5000"))
    changed = runner.invoke(main, ["site", "diff", str(out)])
    assert changed.exit_code == 1, changed.output
    assert changed.output.splitlines() == [f"limits: max_array_size 5000 in the file, {server['max_array_size']} "
                                           "on the cluster"]
