"""YAML positions and the readable configuration errors built on them."""

from pathlib import Path

import pytest

from hpcjobs.config.loading import load_experiment
from hpcjobs.config.sites import load_site_file
from hpcjobs.config.yamlio import parse_yaml
from hpcjobs.errors import ConfigError


def _write(tmp_path: Path, text: str, name: str = "exp.yaml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_positions_are_one_based():
    doc = parse_yaml("a: 1\nb:\n  c: [x, y]\n", "f.yaml")
    assert doc.positions[("a",)] == (1, 1)
    assert doc.positions[("b", "c")] == (3, 3)
    assert doc.positions[("b", "c", 1)] == (3, 10)


def test_wall_times_are_not_base_60_numbers():
    # YAML 1.1 would read 12:00:00 as 43200: a job asking for 12 hours must not get 30 days.
    assert parse_yaml("t: 12:00:00\nu: 1:30\n").data == {"t": "12:00:00", "u": "1:30"}


def test_syntax_error_has_file_line_column():
    with pytest.raises(ConfigError) as info:
        parse_yaml("name: x\nresources: [1\ncommand: y\n", "bad.yaml")
    (p,) = info.value.problems
    assert (p.file, p.line) == ("bad.yaml", 3)
    assert p.column is not None
    assert "YAML syntax error" in p.message


def test_duplicate_keys_are_refused():
    with pytest.raises(ConfigError) as info:
        parse_yaml("name: a\ncommand: x\nname: b\n", "dup.yaml")
    (p,) = info.value.problems
    assert p.line == 3 and "first defined on line 1" in p.message


def test_unknown_key_did_you_mean_and_location(tmp_path):
    path = _write(tmp_path, "name: t\ncommand: x\nresources:\n  gpus_per_nod: 2\n")
    with pytest.raises(ConfigError) as info:
        load_experiment(path)
    (p,) = info.value.problems
    assert p.file == str(path) and (p.line, p.column) == (4, 3)
    assert p.key == "resources.gpus_per_nod"
    assert "did you mean 'gpus_per_node'" in p.message
    assert "gpus_per_node" in p.choices


def test_all_problems_reported_at_once(tmp_path):
    path = _write(tmp_path, "name: 'bad name'\nresources:\n  memory: 16\n  nodes: -1\ncommand: x\n")
    with pytest.raises(ConfigError) as info:
        load_experiment(path)
    keys = sorted(p.key for p in info.value.problems)
    assert keys == ["name", "resources.memory", "resources.nodes"]
    mem = next(p for p in info.value.problems if p.key == "resources.memory")
    assert mem.line == 3 and "unit" in mem.message


def test_command_or_script_required(tmp_path):
    path = _write(tmp_path, "name: t\n")
    with pytest.raises(ConfigError, match="exactly one of 'command' or 'script'"):
        load_experiment(path)


def test_set_overrides_typed_and_located(tmp_path):
    path = _write(tmp_path, "name: t\ncommand: x\n")
    exp, _ = load_experiment(path, ["resources.gpus_per_node=2", "resources.walltime=12:00:00", "params.lr=0.1"])
    assert exp.resources.gpus_per_node == 2
    assert exp.resources.walltime == 12 * 3600
    assert exp.params == {"lr": "0.1"}
    with pytest.raises(ConfigError) as info:
        load_experiment(path, ["resources.nodes=many"])
    (p,) = info.value.problems
    assert p.file == "--set" and p.key == "resources.nodes"
    with pytest.raises(ConfigError, match="KEY=VALUE"):
        load_experiment(path, ["resources.nodes"])


def test_site_scheduler_choices(tmp_path):
    path = _write(tmp_path, "name: s\nscheduler: slrum\n", "s.yaml")
    with pytest.raises(ConfigError) as info:
        load_site_file(path)
    (p,) = info.value.problems
    assert p.line == 2 and p.key == "scheduler"
    assert "did you mean 'slurm'" in p.message
    assert set(p.choices) == {"slurm", "pbspro", "torque", "local"}


def test_site_default_partition_must_exist(tmp_path):
    path = _write(tmp_path, "name: s\nscheduler: slurm\ndefault_partition: gpu\npartitions:\n  cpu: {}\n", "s.yaml")
    with pytest.raises(ConfigError, match="default_partition 'gpu' is not a partition; choices: cpu"):
        load_site_file(path)


def test_environment_names_are_checked(tmp_path):
    path = _write(tmp_path, "name: t\ncommand: x\nenvironment:\n  'BAD-NAME': 1\n")
    with pytest.raises(ConfigError) as info:
        load_experiment(path)
    assert "not a valid environment variable name" in str(info.value)


def test_directive_values_cannot_inject_lines(tmp_path):
    path = _write(tmp_path, 'name: t\ncommand: x\ndirectives: ["--comment=a\\nrm -rf ~"]\n')
    with pytest.raises(ConfigError, match="single line"):
        load_experiment(path)
    path = _write(tmp_path, 'name: t\ncommand: x\noutput_dir: "logs; rm -rf ~"\n')
    with pytest.raises(ConfigError, match="cannot contain spaces"):
        load_experiment(path)


def test_exponent_floats_are_numbers():
    data = parse_yaml("lr: [1e-3, 5E+4, 1.5e3, -2e-1]\ntag: 1e\n").data
    assert data == {"lr": [0.001, 50000.0, 1500.0, -0.2], "tag": "1e"}
