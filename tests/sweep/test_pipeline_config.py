"""``after:`` and ``notify:`` in an experiment: the schema, its located errors, and the mail directives."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpcjobs.config.experiment import Experiment
from hpcjobs.config.loading import load_experiment
from hpcjobs.errors import ConfigError
from hpcjobs.render.script import render_experiment

ROOT = Path(__file__).resolve().parents[2]


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "exp.yaml"
    path.write_text(text)
    return path


def test_after_short_and_long_forms() -> None:
    exp = Experiment.model_validate({"name": "x", "command": "true",
                                     "after": ["prep.yaml", {"sweep": "train-1a2b3c4d", "when": "any"}]})
    assert [(u.sweep, u.when) for u in exp.after] == [("prep.yaml", "ok"), ("train-1a2b3c4d", "any")]
    one = Experiment.model_validate({"name": "x", "command": "true", "after": "prep.yaml"})
    assert [(u.sweep, u.when) for u in one.after] == [("prep.yaml", "ok")]
    assert Experiment.model_validate({"name": "x", "command": "true"}).after == []


def test_notify_defaults_and_yaml_on_key(tmp_path: Path) -> None:
    # YAML 1.1 reads a bare `on` key as true: it still means `on`
    path = _write(tmp_path, "name: x\ncommand: 'true'\nnotify:\n  email: me@example.org\n  on: [begin, fail, begin]\n")
    exp, _doc = load_experiment(path)
    assert exp.notify is not None
    assert (exp.notify.email, exp.notify.on) == ("me@example.org", ["begin", "fail"])
    default = Experiment.model_validate({"name": "x", "command": "true", "notify": {"email": "a@b.org"}})
    assert default.notify is not None and default.notify.on == ["end", "fail"]


def test_bad_after_and_notify_are_located(tmp_path: Path) -> None:
    path = _write(tmp_path, (
        "name: x\n"
        "command: 'true'\n"
        "notify:\n"
        "  email: 'a b@c'\n"
        "  on: [end, never]\n"
        "after:\n"
        "  - {sweep: prep.yaml, when: maybe}\n"
        "  - {sweep: prep.yaml, wen: ok}\n"
        "  - ''\n"
    ))
    with pytest.raises(ConfigError) as info:
        load_experiment(path)
    text = str(info.value)
    assert f"{path}:7:24: after.0.when: invalid value 'maybe'; valid choices: ok, any, done" in text
    assert f"{path}:8:24: after.1.wen: unknown key 'wen'" in text and "did you mean 'when'" in text
    assert f"{path}:4:3: notify.email: 'a b@c' is not an e-mail address" in text
    assert f"{path}:5:13: notify.on.1: invalid value 'never'; valid choices: begin, end, fail" in text
    assert f"{path}:9:5: after.2.sweep:" in text


@pytest.mark.parametrize("email", ["ab.org", "x;rm@b.org", "a@b.org,c@d.org", "$(id)@b.org", "a@-b.org", "a@b..org",
                                   "a\n@b.org", "@b.org", "a@"])
def test_email_shape_refused(email: str) -> None:
    with pytest.raises(ValueError, match="e-mail address"):
        Experiment.model_validate({"name": "x", "command": "true", "notify": {"email": email}})


def test_empty_on_refused() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        Experiment.model_validate({"name": "x", "command": "true", "notify": {"email": "a@b.org", "on": []}})


def _directives(tmp_path: Path, site: str, on: str) -> list[str]:
    path = _write(tmp_path, f"name: mailer\ncommand: 'true'\nnotify: {{email: me@example.org, on: {on}}}\n")
    overrides = ("account=abc123",) if site in ("jean-zay", "derecho") else ()
    text = render_experiment(path, site=str(ROOT / "site-configs" / f"{site}.yaml"), overrides=overrides).text
    return [line for line in text.splitlines() if line.startswith(("#SBATCH --mail", "#PBS -M", "#PBS -m"))]


def test_mail_directives_per_scheduler(tmp_path: Path) -> None:
    assert _directives(tmp_path, "jean-zay", "[end, fail]") == [
        "#SBATCH --mail-user=me@example.org", "#SBATCH --mail-type=END,FAIL"]
    assert _directives(tmp_path, "jean-zay", "[begin]") == [
        "#SBATCH --mail-user=me@example.org", "#SBATCH --mail-type=BEGIN"]
    assert _directives(tmp_path, "derecho", "[fail, begin, end]") == ["#PBS -M me@example.org", "#PBS -m bea"]
    assert _directives(tmp_path, "carbon", "[fail]") == ["#PBS -M me@example.org", "#PBS -m a"]


def test_notify_on_a_site_without_mail_warns(tmp_path: Path) -> None:
    path = _write(tmp_path, "name: mailer\ncommand: 'true'\nnotify: {email: me@example.org}\n")
    rendered = render_experiment(path, site="local")
    assert any("sends no mail" in w for w in rendered.job.warnings)


def test_unset_after_and_notify_keep_sweep_ids() -> None:
    """A sweep planned before these keys existed keeps its id: unset, they are not part of the digest."""
    import hashlib
    import json

    from hpcjobs.sweep.identity import OMITTED_WHEN_UNSET, experiment_digest

    assert {"after", "notify"} <= set(OMITTED_WHEN_UNSET)
    exp = Experiment.model_validate({"name": "x", "command": "true"})
    data = exp.model_dump(mode="json")
    for key in OMITTED_WHEN_UNSET:  # keys added later, each unset here
        del data[key]
    old = hashlib.sha256(json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                                    default=str).encode("utf-8")).hexdigest()
    assert experiment_digest(exp) == old
    waits = Experiment.model_validate({"name": "x", "command": "true", "after": ["prep.yaml"]})
    assert experiment_digest(waits) != old
