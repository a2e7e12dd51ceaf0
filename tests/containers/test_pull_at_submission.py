"""``containers.pull: submit``: which images are fetched, where they go, and the script that fetches them.

The script runs here with stand-in runtimes on ``PATH`` (shell scripts that record their argv and write
the output file), because Debian 12 has no Apptainer or enroot; Podman's own fetch runs for real in
``check_pull_at_submission`` (tests/containers/real_podman.py) on the Slurm and OpenPBS testbeds.
"""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hpcjobs.config.container import (
    ContainerSpec,
    ResolvedContainer,
    SiteContainers,
    is_registry_image,
    pulled_image_path,
    resolve_container,
)
from hpcjobs.containers.pull import pull_argv, pull_images
from hpcjobs.errors import ContainerPullError
from hpcjobs.render.script import render_experiment

ROOT = Path(__file__).resolve().parents[2]


def _site(cache: str = "/scratch/images", pull: str = "submit", **runtime: object) -> SiteContainers:
    runtimes = {"apptainer": {}, "singularity": {}, "podman": {}, "pyxis": {}, "oci": {}}
    runtimes.update(runtime)  # type: ignore[arg-type]
    return SiteContainers.model_validate({"runtimes": runtimes, "pull": pull, "image_cache": cache})


def _resolved(image: str, runtime: str, site: SiteContainers | None = None) -> ResolvedContainer:
    return resolve_container(ContainerSpec(image=image, runtime=runtime), site or _site(), job_env=(), gpus=False)


@pytest.mark.parametrize(("runtime", "suffix"), [("apptainer", ".sif"), ("singularity", ".sif"),
                                                 ("pyxis", ".sqsh"), ("podman", ".tar")])
def test_a_registry_image_runs_from_its_file_in_the_cache(runtime: str, suffix: str) -> None:
    c = _resolved("docker://nvcr.io/nvidia/pytorch:24.05-py3", runtime)
    assert c.pull_from == "docker://nvcr.io/nvidia/pytorch:24.05-py3"
    assert c.image.startswith("/scratch/images/nvcr.io-nvidia-pytorch-24.05-py3-") and c.image.endswith(suffix)


@pytest.mark.parametrize(("image", "runtime"), [("/images/train.sif", "apptainer"), ("~/img/train.sif", "singularity"),
                                                ("/images/train.sqsh", "pyxis"), ("/bundles/train", "oci"),
                                                ("docker://ubuntu:22.04", "oci")])
def test_files_bundles_and_oci_are_never_fetched(image: str, runtime: str) -> None:
    c = _resolved(image, runtime)
    assert c.pull_from is None and c.image == image


def test_pull_job_leaves_the_image_to_the_runtime() -> None:
    c = _resolved("docker://ubuntu:22.04", "apptainer", _site(pull="job"))
    assert (c.pull_from, c.image) == (None, "docker://ubuntu:22.04")


def test_registry_images_and_files_are_told_apart() -> None:
    assert all(is_registry_image(i) for i in ("docker://a/b:1", "oras://r/x:1", "library://u/c/i:1", "ubuntu:22.04",
                                              "nvcr.io#nvidia/pytorch:24.05-py3", "localhost/x/y:1"))
    assert not any(is_registry_image(i) for i in ("/a/b.sif", "~/b.sif", "x.sif", "x.sqsh", "/bundle"))


_IMAGE_CHARS = st.text(alphabet="abcXYZ019._/:@#+=,~-", min_size=1, max_size=300)


@settings(max_examples=300, deadline=None)
@given(image=_IMAGE_CHARS, other=_IMAGE_CHARS)
def test_cache_names_are_plain_words_below_the_cache_and_differ_per_image(image: str, other: str) -> None:
    path = pulled_image_path(image, "apptainer", "~/.cache/hpcjobs/images")
    folder, name = path.rsplit("/", 1)
    assert folder == "~/.cache/hpcjobs/images"
    assert re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*-[0-9a-f]{12}\.sif", name), name
    assert len(name) <= 100
    if image != other:
        assert pulled_image_path(other, "apptainer", "~/.cache/hpcjobs/images") != path
    assert pulled_image_path(image, "podman", "~/.cache/hpcjobs/images") != path


def test_a_site_with_a_bad_pull_setting_or_cache_is_refused(tmp_path: Path) -> None:
    from pydantic import ValidationError

    for bad in ({"pull": "always"}, {"image_cache": "relative/cache"}, {"image_cache": "/a/../etc"},
                {"image_cache": "/cache\n/x"}, {"image_cache": "/cache;rm -rf ~"}):
        with pytest.raises(ValidationError):
            SiteContainers.model_validate({"runtimes": {"podman": {}}, **bad})


# ---------------------------------------------------------------------------------------------- the fetch

#: A stand-in for a runtime: records its argv (one JSON list per line) and writes its output file.
STAND_IN = """#!/bin/bash
python3 -c 'import json, sys; print(json.dumps(sys.argv[1:]))' "$(basename "$0")" "$@" >>"$HPCJOBS_TEST_CALLS"
if [ -n "${HPCJOBS_TEST_FAIL:-}" ]; then echo "pull failed: $HPCJOBS_TEST_FAIL" >&2; exit 7; fi
case "$(basename "$0")" in
    apptainer|singularity) printf 'SIF' >"$2" ;;          # apptainer pull FILE REF
    enroot) printf 'SQSH' >"$3" ;;                         # enroot import --output FILE URI
    podman) [ "$1" = save ] && printf 'OCI' >"$6" ;;       # podman save --quiet --format oci-archive --output FILE REF
esac
exit 0
"""


@pytest.fixture
def runtimes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("apptainer", "singularity", "enroot", "podman"):
        (bin_dir / name).write_text(STAND_IN)
        (bin_dir / name).chmod(0o755)
    calls = tmp_path / "calls.jsonl"
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("HPCJOBS_TEST_CALLS", str(calls))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("HPCJOBS_TEST_FAIL", raising=False)
    return calls


def _calls(path: Path) -> list[list[str]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.mark.parametrize(("runtime", "scheduler", "argv", "content"), [
    ("apptainer", "slurm", ["apptainer", "pull", "TMP", "docker://nvcr.io/nvidia/pytorch:24.05-py3"], "SIF"),
    ("singularity", "pbspro", ["singularity", "pull", "TMP", "docker://nvcr.io/nvidia/pytorch:24.05-py3"], "SIF"),
    ("pyxis", "slurm", ["enroot", "import", "--output", "TMP", "docker://nvcr.io#nvidia/pytorch:24.05-py3"], "SQSH"),
])
def test_each_runtime_fetches_into_the_cache_once(runtimes: Path, tmp_path: Path, runtime: str, scheduler: str,
                                                  argv: list[str], content: str) -> None:
    cache = tmp_path / "cache"
    c = _resolved("docker://nvcr.io/nvidia/pytorch:24.05-py3", runtime, _site(str(cache)))
    (first,) = pull_images([c, c], scheduler)  # the same image twice: fetched once
    assert first.fetched and first.path == c.image and Path(c.image).read_text() == content
    (call,) = _calls(runtimes)
    assert [a if not a.endswith("/image") else "TMP" for a in call] == argv
    assert Path(call[argv.index("TMP")]).parent.parent == cache  # a fresh folder in the cache, renamed into place
    assert sorted(p.name for p in cache.iterdir()) == [Path(c.image).name]  # the temporary folder is gone
    (again,) = pull_images([c], scheduler)
    assert not again.fetched and len(_calls(runtimes)) == 1


def test_podman_saves_an_archive_of_the_image_it_has(runtimes: Path, tmp_path: Path) -> None:
    c = _resolved("localhost/team/train:1", "podman", _site(str(tmp_path / "cache")))
    pull_images([c], "slurm")
    calls = _calls(runtimes)
    assert calls[0] == ["podman", "image", "exists", "localhost/team/train:1"]  # present: no pull
    assert calls[1][:6] == ["podman", "save", "--quiet", "--format", "oci-archive", "--output"]
    assert calls[1][7] == "localhost/team/train:1" and Path(c.image).read_text() == "OCI"


def test_the_cache_may_be_in_the_home_folder(runtimes: Path, tmp_path: Path) -> None:
    c = _resolved("docker://alpine:3", "apptainer", _site("~/images"))
    assert c.image.startswith("~/images/")
    (done,) = pull_images([c], "slurm")
    assert done.path.startswith(str(tmp_path / "home" / "images") + "/")
    assert Path(done.path).read_text() == "SIF"


def test_a_failed_fetch_says_what_failed_and_leaves_nothing(runtimes: Path, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HPCJOBS_TEST_FAIL", "registry said 401 Unauthorized")
    cache = tmp_path / "cache"
    c = _resolved("docker://nvcr.io/nvidia/private:1", "apptainer", _site(str(cache)))
    with pytest.raises(ContainerPullError) as info:
        pull_images([c], "slurm")
    text = str(info.value)
    assert "could not fetch image docker://nvcr.io/nvidia/private:1 with apptainer" in text
    assert "exited with code 7" in text and "registry said 401 Unauthorized" in text and "nothing was submitted" in text
    assert list(cache.iterdir()) == []


@pytest.mark.parametrize("link", ["folder", "file"])
def test_a_linked_cache_is_not_written_through(runtimes: Path, tmp_path: Path, link: str) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    cache = tmp_path / "cache"
    c = _resolved("docker://alpine:3", "apptainer", _site(str(cache)))
    if link == "folder":
        cache.symlink_to(elsewhere)
    else:
        cache.mkdir()
        Path(c.image).symlink_to(elsewhere / "victim")
    with pytest.raises(ContainerPullError) as info:
        pull_images([c], "slurm")
    assert "symbolic link" in str(info.value) and "exited with code 3" in str(info.value)
    assert list(elsewhere.iterdir()) == [] and _calls(runtimes) == []


def test_hostile_values_reach_the_runtime_as_one_word_each(runtimes: Path, tmp_path: Path) -> None:
    """The schema refuses these; built by hand they still reach the runtime literally, running nothing."""
    marker = tmp_path / "ran"
    ref = f"docker://x/$(touch {marker}):1;touch {marker} `touch {marker}`"
    c = ResolvedContainer(runtime="apptainer", image=str(tmp_path / "c" / "img $(id).sif"), mounts=(), workdir=None,
                          pass_env=None, job_env=(), gpu_flags=(), module=None, pull_from=ref)
    (done,) = pull_images([c], "slurm")
    assert done.path == c.image and Path(c.image).exists()
    assert _calls(runtimes)[0][-1] == ref and not marker.exists()


def test_a_runtime_module_is_loaded_in_a_login_shell() -> None:
    c = _resolved("docker://alpine:3", "apptainer", _site(apptainer={"module": "apptainer/1.3"}))
    argv = pull_argv(c, "slurm")
    assert argv[:3] == ["bash", "--login", "-c"] and "module load apptainer/1.3\n" in argv[3]
    assert pull_argv(_resolved("docker://alpine:3", "podman"), "slurm")[:2] == ["bash", "-c"]


# ---------------------------------------------------------------------------------------------- the job script

def test_the_job_checks_its_image_file_and_runs_it(tmp_path: Path) -> None:
    site = tmp_path / "site.yaml"
    site.write_text((ROOT / "tests" / "sites" / "containers-slurm.yaml").read_text()
                    + "  pull: submit\n  image_cache: /scratch/images\n")
    exp = ROOT / "tests" / "data" / "containers" / "plain.yaml"
    for runtime, start in (("apptainer", "apptainer exec --nv "),
                           ("podman", "--quiet oci-archive:/scratch/images/"),
                           ("pyxis", "--container-image=/scratch/images/")):
        text = render_experiment(exp, site=str(site), overrides=(f"container.runtime={runtime}",)).text
        assert "containers.pull: submit" in text and "if [ ! -f /scratch/images/" in text, runtime
        assert start in text, runtime
        rest = text.replace("# The image was fetched at submission from docker://", "")
        assert "docker://nvcr.io" not in rest and "nvcr.io#" not in rest, runtime


def test_the_cached_file_keeps_the_submitters_mode(runtimes: Path, tmp_path: Path) -> None:
    os.umask(0o077)
    try:
        c = _resolved("docker://alpine:3", "apptainer", _site(str(tmp_path / "cache")))
        pull_images([c], "slurm")
    finally:
        os.umask(0o022)
    assert stat.S_IMODE(Path(c.image).stat().st_mode) & 0o077 == 0
