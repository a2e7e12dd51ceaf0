"""Sending a sweep folder to a login node and bringing run folders back (:mod:`hpcjobs.transport.files`).

The "login node" here is this machine: :class:`HereSession` is the real :class:`SshSession` with ssh left
out of the command line, so the scripts, GNU tar, find and base64 on the far side are the real ones and
only the connection is missing (the SSH testbed tests cover that). The far side is hostile in places: a
run folder that is a link, a file name with a newline, a link where a file is expected.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hpcjobs.errors import CommandError, UnsafePathError
from hpcjobs.transport.files import local_files, pull, push, remote_listing
from hpcjobs.transport.login import RemoteLogin
from hpcjobs.transport.ssh import SshSession


class HereSession(SshSession):
    """An :class:`SshSession` whose scripts run in a local ``bash -s`` (no ssh, no connection)."""

    def connect(self) -> None:
        return None

    def ssh_argv(self, *extra: str) -> list[str]:
        return []


@pytest.fixture
def here() -> HereSession:
    return HereSession(RemoteLogin(host="login.example.org"))


def tree(root: Path, files: dict[str, bytes]) -> None:
    for rel, data in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


def never(_rel: str) -> bool:
    return False


def test_push_sends_regular_files_once_and_leaves_links_and_fifos(here: HereSession, tmp_path: Path) -> None:
    local, remote = tmp_path / "here", tmp_path / "there"
    tree(local, {"scripts/0.a.sh": b"#!/bin/bash\necho hi\n", "chunks/0.env": "x=\u00e9\n".encode(),
                 "ledger.sqlite": b"ledger"})
    (local / "scripts" / "0.a.sh").chmod(0o700)
    os.symlink("/etc/passwd", local / "chunks" / "link")
    os.mkfifo(local / "chunks" / "fifo")
    sent: dict[str, tuple[int, int]] = {}
    got = push(here, local, str(remote), skip=lambda rel: rel.startswith("ledger"), sent=sent,
               also_make=[str(tmp_path / "there-logs")])
    assert got == ["chunks/0.env", "scripts/0.a.sh"]
    assert (remote / "chunks" / "0.env").read_bytes() == "x=\u00e9\n".encode()
    assert os.access(remote / "scripts" / "0.a.sh", os.X_OK)
    assert not (remote / "ledger.sqlite").exists() and not (remote / "chunks" / "link").exists()
    assert (tmp_path / "there-logs").is_dir()
    assert push(here, local, str(remote), skip=lambda rel: rel.startswith("ledger"), sent=sent) == []
    (local / "chunks" / "1.env").write_text("y=1\n")
    assert push(here, local, str(remote), skip=lambda rel: rel.startswith("ledger"), sent=sent) == ["chunks/1.env"]


def test_push_replaces_a_link_on_the_far_side_instead_of_writing_through_it(here: HereSession,
                                                                              tmp_path: Path) -> None:
    local, remote, victim = tmp_path / "here", tmp_path / "there", tmp_path / "victim"
    tree(local, {"scripts/0.sh": b"new\n"})
    victim.write_bytes(b"precious\n")
    (remote / "scripts").mkdir(parents=True)
    os.symlink(victim, remote / "scripts" / "0.sh")
    push(here, local, str(remote), skip=never, sent={})
    assert victim.read_bytes() == b"precious\n"
    assert (remote / "scripts" / "0.sh").read_bytes() == b"new\n"


def test_pull_fetches_only_new_or_changed_files(here: HereSession, tmp_path: Path) -> None:
    remote, local = tmp_path / "there", tmp_path / "here"
    tree(remote, {"points/a/metrics.json": b'{"acc": 0.5}', "points/a/stdout.log": b"line\n",
                  "points/b/stdout.log": b"\xff\xfe binary \x00 bytes"})
    local.mkdir()
    first = pull(here, str(remote), local, ["points"])
    assert sorted(first.fetched or []) == ["points/a/metrics.json", "points/a/stdout.log", "points/b/stdout.log"]
    assert (local / "points" / "b" / "stdout.log").read_bytes() == b"\xff\xfe binary \x00 bytes"
    assert pull(here, str(remote), local, ["points"]).fetched == []
    (remote / "points" / "a" / "stdout.log").write_bytes(b"line\nmore\n")
    again = pull(here, str(remote), local, ["points"])
    assert again.fetched == ["points/a/stdout.log"] and again.sessions == 2
    assert (local / "points" / "a" / "stdout.log").read_bytes() == b"line\nmore\n"


def test_pull_leaves_links_odd_names_and_large_files_there(here: HereSession, tmp_path: Path) -> None:
    remote, local, secret = tmp_path / "there", tmp_path / "here", tmp_path / "secret"
    secret.write_text("not yours\n")
    tree(remote, {"points/a/ok.txt": b"ok", "points/a/big.bin": b"x" * 2000, "points/a/new\nline": b"odd"})
    os.symlink(secret, remote / "points" / "a" / "link.txt")
    os.symlink(tmp_path, remote / "points" / "linked-folder")
    local.mkdir()
    report = pull(here, str(remote), local, ["points"], max_file_bytes=1000)
    assert report.fetched == ["points/a/ok.txt"]
    assert report.skipped_large == ["points/a/big.bin"]
    assert not (local / "points" / "a" / "link.txt").exists()
    assert not (local / "points" / "linked-folder").exists()


def test_a_remote_run_folder_that_is_a_link_is_not_listed(here: HereSession, tmp_path: Path) -> None:
    remote = tmp_path / "there"
    remote.mkdir()
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "f").write_text("f")
    os.symlink(tmp_path / "elsewhere", remote / "points")
    assert remote_listing(here, str(remote), ["points"]) == []


def test_pull_never_writes_through_a_local_link(here: HereSession, tmp_path: Path) -> None:
    remote, local, victim = tmp_path / "there", tmp_path / "here", tmp_path / "victim"
    tree(remote, {"points/a/stdout.log": b"from the job\n"})
    victim.mkdir()
    local.mkdir()
    os.symlink(victim, local / "points")
    with pytest.raises(UnsafePathError):
        pull(here, str(remote), local, ["points"])
    assert list(victim.iterdir()) == []


def test_a_missing_remote_folder_lists_nothing(here: HereSession, tmp_path: Path) -> None:
    assert remote_listing(here, str(tmp_path / "missing"), ["points"]) == []


def test_a_failed_transfer_marks_nothing_sent(here: HereSession, tmp_path: Path) -> None:
    local = tmp_path / "here"
    tree(local, {"scripts/0.sh": b"x"})
    blocker = tmp_path / "file"
    blocker.write_text("a file, not a folder")
    sent: dict[str, tuple[int, int]] = {}
    with pytest.raises(CommandError):
        push(here, local, str(blocker / "sub"), skip=never, sent=sent)
    assert sent == {}


def test_local_files_skips_what_stays_here(tmp_path: Path) -> None:
    tree(tmp_path, {"points/a/x": b"", "scripts/s": b""})
    assert list(local_files(tmp_path, lambda rel: rel.split("/")[0] == "points")) == ["scripts/s"]


def test_what_a_login_profile_prints_is_dropped(here: HereSession, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """The scripts run in a login shell (the login node's PATH); a chatty profile changes no answer."""
    (tmp_path / ".bash_profile").write_text("echo 'Welcome to the cluster'\necho 'quota: 93%' >&2\n")
    monkeypatch.setenv("HOME", str(tmp_path))
    result = here(["printf", "%s", "answer"])
    assert result.stdout == "answer" and "Welcome" not in result.stdout
    assert "quota" not in result.stderr


class NeverRuns(HereSession):
    """A login node whose shell exits before it reads the script (0, and no output)."""

    def ssh_argv(self, *extra: str) -> list[str]:
        return ["sh", "-c", "exit 0", "sh"]


def test_a_script_that_never_ran_is_no_success(tmp_path: Path) -> None:
    from hpcjobs.transport.ssh import RemoteConnectionError

    session = NeverRuns(RemoteLogin(host="login.example.org"))
    with pytest.raises(RemoteConnectionError, match="did not run") as caught:
        session(["sbatch", "job.sh"])
    assert caught.value.returncode is None  # ambiguous for the submitter: look the tag up, never resubmit blindly
    with pytest.raises(RemoteConnectionError):
        push(session, tmp_path, "/nowhere", skip=never, sent={}, also_make=["/nowhere"])


def test_a_secret_from_the_submitters_environment_is_refused_over_ssh(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Over SSH the submitter's environment is the login node's shell: an `env:` secret is refused before any
    connection, with where and what to write instead (exit 2 in the CLI)."""
    from hpcjobs.errors import ConfigError
    from hpcjobs.sweep.api import run_sweep

    site = tmp_path / "remote.yaml"
    site.write_text("name: far\nscheduler: slurm\nremote: {host: login.invalid}\n"
                    "partitions: {debug: {max_walltime: '01:00:00'}}\ndefault_partition: debug\n")
    exp = tmp_path / "exp.yaml"
    exp.write_text("name: s\ncommand: echo hi\nsecrets:\n  TOKEN: {env: TOKEN}\nsweep:\n  grid: {x: [1, 2]}\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("hpcjobs.transport.places_for", lambda *a: pytest.fail("connected"))
    with pytest.raises(ConfigError) as caught:
        run_sweep(exp, site=str(site))
    text = str(caught.value)
    assert "exp.yaml:3" in text and "file:" in text and "TOKEN" in text
    assert not (tmp_path / "hpcjobs-sweeps").exists()


def test_a_remote_block_that_could_become_an_ssh_option_is_refused_at_load(tmp_path: Path) -> None:
    from hpcjobs.config.sites import load_site_file
    from hpcjobs.errors import ConfigError

    for bad in ("host: -oProxyCommand=touch x", "host: a b", "{host: ok, user: '-l'}", "{host: ok, port: 70000}",
                "{host: ok, options: ['ProxyCommand\\nx']}", "{host: ok, options: ['ProxyCommand=touch /tmp/x']}",
                "{host: ok, options: ['stricthostkeychecking no']}", "{host: ok, options: ['LocalCommand=id']}",
                "{host: ok, options: ['UserKnownHostsFile=/dev/null']}"):
        site = tmp_path / "s.yaml"
        body = bad if bad.startswith("{") else "{" + bad + "}"
        site.write_text(f"name: far\nscheduler: slurm\nremote: {body}\n")
        with pytest.raises(ConfigError) as caught:
            load_site_file(site)
        assert "remote" in str(caught.value), bad


@pytest.mark.parametrize(("text", "user", "host", "port"), [
    ("login.example.org", None, "login.example.org", None), ("me@login", "me", "login", None),
    ("me@10.0.0.1:2222", "me", "10.0.0.1", 2222), ("fe80::1", None, "fe80::1", None)])
def test_the_remote_option(text: str, user: str | None, host: str, port: int | None) -> None:
    from hpcjobs.transport.login import parse_remote_option

    login = parse_remote_option(text)
    assert (login.user, login.host, login.port) == (user, host, port)


@pytest.mark.parametrize("text", ["-oProxyCommand=x", "me@", "a@b:port", "a@b:99999", "a b", "@host", "h\u0665:22"])
def test_a_remote_option_that_is_no_login_is_refused(text: str) -> None:
    from hpcjobs.errors import ConfigError
    from hpcjobs.transport.login import parse_remote_option

    with pytest.raises(ConfigError):
        parse_remote_option(text)


def test_a_remote_block_on_a_site_of_services_is_refused_before_any_connection(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Swarm and Kubernetes are reached through their own clients' contexts, not a login node."""
    import dataclasses

    from hpcjobs.config.experiment import Experiment
    from hpcjobs.config.site import SiteRemote
    from hpcjobs.errors import ConfigError
    from hpcjobs.sweep.request import login_node_of

    monkeypatch.setattr("hpcjobs.transport.places_for", lambda *a: pytest.fail("connected"))
    site = dataclasses.make_dataclass("S", [("name", str), ("scheduler", str), ("remote", object)])(
        "k8s", "kubernetes", SiteRemote(host="login.example.org"))  # what login_node_of reads of a site
    experiment = Experiment.model_validate({"name": "x", "command": "true"})
    with pytest.raises(ConfigError, match="remote:"):
        login_node_of(site, experiment, "exp.yaml", None)  # type: ignore[arg-type]


def test_the_recorded_places_read_back_as_written() -> None:
    from hpcjobs.transport import RemotePlaces

    places = RemotePlaces(RemoteLogin(host="login", user="me", port=2200, options=("ProxyJump=bastion",)),
                          "/home/me/hpcjobs", "/home/me/hpcjobs/hpcjobs-sweeps/s.0123456789ab", "me")
    assert RemotePlaces.from_dict(places.as_dict()) == places
    from hpcjobs.errors import ConfigError

    with pytest.raises(ConfigError):
        RemotePlaces.from_dict({"host": "login"})
    with pytest.raises(ConfigError):
        RemotePlaces.from_dict({**places.as_dict(), "host": "-oProxyCommand=x"})


def test_a_site_may_jump_through_a_bastion(tmp_path: Path) -> None:
    from hpcjobs.config.sites import load_site_file

    site = tmp_path / "s.yaml"
    site.write_text("name: far\nscheduler: slurm\nremote: {host: login, options: [ProxyJump=bastion, "
                    "'ServerAliveInterval 30']}\n")
    assert load_site_file(site).remote.options == ["ProxyJump=bastion", "ServerAliveInterval 30"]


# -- remote.sync: which files of the submit folder go -------------------------------------------------------

def test_sync_keeps_the_listed_paths_without_the_excluded_ones(tmp_path: Path) -> None:
    from hpcjobs.transport.files import local_files, sync_filter

    for rel in ("train.py", "notes.txt", "src/model.py", "src/__pycache__/model.pyc", "src/deep/x.py",
                "src/big.ckpt", "data/a.h5", "configs/base.yaml", "configs/old/x.yaml", ".git/HEAD", "trainer.py"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(rel)
    (tmp_path / "src" / "link.py").symlink_to(tmp_path / "notes.txt")
    skip = sync_filter(["train.py", "src/", "configs/base.yaml", "data"], ["__pycache__", "*.ckpt", "data/*.h5"])
    assert sorted(local_files(tmp_path, skip)) == ["configs/base.yaml", "src/deep/x.py", "src/model.py", "train.py"]


def test_sync_problems_name_missing_and_linked_entries(tmp_path: Path) -> None:
    from hpcjobs.transport.files import sync_problems

    (tmp_path / "src").mkdir()
    (tmp_path / "linked").symlink_to(tmp_path / "src")
    problems = sync_problems(tmp_path, ["src", "missing.py", "linked"])
    assert len(problems) == 2
    assert problems[0].startswith("missing.py: no such file or folder")
    assert problems[1].startswith("linked: is a symbolic link")


@pytest.mark.parametrize("entry", ["/etc/passwd", "~/.ssh", "../up", "src/../..", "-rf", ".", "a\nb", "", "a//b"])
def test_a_sync_entry_outside_the_submit_folder_is_refused(entry: str) -> None:
    from pydantic import ValidationError

    from hpcjobs.config.site import SiteRemote

    with pytest.raises(ValidationError):
        SiteRemote.model_validate({"host": "login", "sync": [entry]})
    assert SiteRemote.model_validate({"host": "login", "sync": ["src/", "a/b.py"]}).sync == ["src", "a/b.py"]
