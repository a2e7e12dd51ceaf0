"""Read-only commands over SSH without a testbed: what ``site init --remote`` writes, where accounting is cached.

The real runs (``site init``, ``plan`` and ``report`` against the Slurm testbed through sshd) are in
``tests/ssh/test_ssh_slurm.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from hpcjobs import transport
from hpcjobs.accounting.cache import WindowCache, accounting_cache_root
from hpcjobs.config.discover_model import DiscoveredPartition, DiscoveredSite, Sourced, render_site_yaml
from hpcjobs.config.site import SiteConfig
from hpcjobs.transport.login import RemoteLogin


def test_a_site_read_over_ssh_names_its_login_node_and_validates() -> None:
    site = DiscoveredSite(name="c1", scheduler="slurm", cluster="c1",
                          partitions=[DiscoveredPartition("debug", {"max_nodes": Sourced(1, "scontrol")})],
                          remote={"host": Sourced("login.example.org", "--remote"),
                                  "user": Sourced("al ice", "--remote"), "port": Sourced(2222, "--remote")})
    text = render_site_yaml(site, ["header"])
    doc = yaml.safe_load(text)
    assert doc["remote"] == {"host": "login.example.org", "user": "al ice", "port": 2222}
    assert doc == {**site.document(), "detect": {"cluster_names": ["c1"]}}
    with pytest.raises(Exception, match="user"):  # a login name with a space is refused by the site schema
        SiteConfig.model_validate(doc)
    doc["remote"]["user"] = "alice"
    assert SiteConfig.model_validate(doc).remote.port == 2222  # type: ignore[union-attr]


def test_each_login_node_has_its_own_accounting_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HPCJOBS_CACHE_DIR", str(tmp_path))
    assert accounting_cache_root() == tmp_path
    a, b = RemoteLogin(host="login1.example.org"), RemoteLogin(host="login1.example.org", port=2222)
    assert a.cache_folder(tmp_path) != b.cache_folder(tmp_path)
    assert a.cache_folder(tmp_path).parent == tmp_path / "remote"
    with transport.scope():
        transport.use(a)  # no connection is made until a command runs
        assert accounting_cache_root() == a.cache_folder(tmp_path)
        assert WindowCache().directory == a.cache_folder(tmp_path) / "sacct"
    assert WindowCache().directory == tmp_path / "sacct"


def test_ssh_config_needs_remote_in_site_init(tmp_path: Path) -> None:
    from helpers import run_hpcjobs

    done = run_hpcjobs("site", "init", "--ssh-config", str(tmp_path / "cfg"), cwd=tmp_path)
    assert done.returncode == 2 and "--ssh-config goes with --remote" in done.stderr, done.stderr


def test_only_the_sweeps_own_logs_are_fetched_from_a_shared_output_folder() -> None:
    from hpcjobs.sweep.remote import logs_of_jobs

    keep = logs_of_jobs(["1517", "2000[].pbs-server", "88"])
    assert all(keep(n) for n in ("logs/train-1517_3.out", "train-1517.err", "train.o2000", "x.e2000.3",
                                 "logs/slurm-88_0.out", "88"))
    assert not any(keep(n) for n in ("logs/train-15170_3.out", "train-11517.err", "o20001", "1517/other.out",
                                     "logs/slurm-880.out", "x"))
    assert not logs_of_jobs([])("train-1517.out")
