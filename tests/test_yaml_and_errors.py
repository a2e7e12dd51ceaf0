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
    assert set(p.choices) == {"slurm", "pbspro", "torque", "local", "kubernetes", "swarm"}


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


# --- limits on hostile input -------------------------------------------------------------------


def _nested(depth: int) -> str:
    return "a: " + "[" * (depth - 1) + "]" * (depth - 1) + "\n"


def test_nesting_up_to_the_limit_is_read_and_one_more_is_refused():
    from hpcjobs.config.yamlio import MAX_DEPTH, YamlLimitError

    doc = parse_yaml(_nested(MAX_DEPTH), "ok.yaml")  # the mapping is level 1, the lists 2..MAX_DEPTH
    inner = doc.data["a"]
    for _ in range(MAX_DEPTH - 2):
        inner = inner[0]
    assert inner == []
    with pytest.raises(YamlLimitError) as info:
        parse_yaml(_nested(MAX_DEPTH + 1), "deep.yaml")
    (p,) = info.value.problems
    assert (p.file, p.line, p.column) == ("deep.yaml", 1, 4 + MAX_DEPTH - 1)
    assert f"nesting depth {MAX_DEPTH + 1} is over the limit of {MAX_DEPTH} levels" in p.message


def test_five_thousand_nested_brackets_are_a_config_error_not_a_recursion_error():
    with pytest.raises(ConfigError) as info:
        parse_yaml("x: 1\ny: " + "[" * 5000 + "]" * 5000 + "\n", "deep.yaml")
    assert info.value.problems[0].line == 2


def test_nesting_is_counted_through_aliases():
    # each anchor is 60 levels deep and holds the previous one: 3 of them nest 180 deep once expanded
    text = "a: &a " + "[" * 60 + "]" * 60 + "\n"
    text += "b: &b " + "[" * 59 + "*a" + "]" * 59 + "\n"
    text += "c: " + "[" * 59 + "*b" + "]" * 59 + "\n"
    with pytest.raises(ConfigError) as info:
        parse_yaml(text, "alias-depth.yaml")
    (p,) = info.value.problems
    assert p.line == 2 and "through alias *a" in p.message and "over the limit of 100" in p.message


def test_an_alias_inside_its_own_anchor_is_refused():
    with pytest.raises(ConfigError) as info:
        parse_yaml("name: x\nloop: &me\n  self: *me\n", "cycle.yaml")
    (p,) = info.value.problems
    assert (p.line, p.column) == (3, 9)
    assert "alias *me is inside the node &me it names" in p.message


def test_billion_laughs_is_refused_with_the_count_and_the_limit():
    lines = ["l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 10) + "]" for i in range(1, 10)]
    with pytest.raises(ConfigError) as info:
        parse_yaml("\n".join(lines) + "\n", "lol.yaml")
    (p,) = info.value.problems
    assert p.line == 6  # 10 + 100 + 1000 + 10^4 + 10^5 values are fine; the 10^6 level is not
    assert "(limit 1,000,000)" in p.message and "through alias *l4" in p.message


def test_alias_uses_are_limited():
    from hpcjobs.config.yamlio import MAX_ALIASES

    text = "a: &a 1\nb: [" + ", ".join(["*a"] * (MAX_ALIASES + 1)) + "]\n"
    with pytest.raises(ConfigError) as info:
        parse_yaml(text, "many.yaml")
    assert f"{MAX_ALIASES + 1:,} alias uses (*name) are over the limit of {MAX_ALIASES:,}" in str(info.value)
    ok = parse_yaml("a: &a 1\nb: [" + ", ".join(["*a"] * 100) + "]\n").data
    assert ok["b"] == [1] * 100


def test_merge_keys_and_small_aliases_still_work():
    doc = parse_yaml("base: &b {cpus: 4, mem: 8G}\njob:\n  <<: *b\n  cpus: 8\nagain: *b\n", "m.yaml")
    assert doc.data["job"] == {"cpus": 8, "mem": "8G"}
    assert doc.data["again"] == {"cpus": 4, "mem": "8G"}
    assert doc.position(("again", "cpus")) == (5, 1)  # a node reached again falls back to the alias's key


@pytest.mark.parametrize(("text", "digits"), [("9" * 101, 101), ("-" + "1_0" * 60, 120), ("0x" + "f" * 101, 101),
                                              ("9" * 5000, 5000)])
def test_integers_over_a_hundred_digits_are_refused_before_python_reads_them(text, digits):
    with pytest.raises(ConfigError) as info:
        parse_yaml(f"name: x\nparams:\n  n: {text}\n", "int.yaml")
    (p,) = info.value.problems
    assert (p.line, p.column) == (3, 6)
    assert f"an integer with {digits:,} digits is over the limit of 100 digits" in p.message
    assert parse_yaml(f"n: '{text}'\n").data == {"n": text}  # quoted, it is text
    assert parse_yaml("n: " + "9" * 100 + "\n").data == {"n": int("9" * 100)}


@pytest.mark.parametrize(("text", "where", "what"), [
    ("name: a\x01b\n", (1, 8), "control character 0x01"),
    ("name: x\ncommand: 'y\x00'\n", (2, 12), "a NUL character"),
    ("a: 1\n\n  b: \x7f\n", (3, 6), "control character 0x7f"),
    ("a: \ufffe\n", (1, 4), "the character U+FFFE"),
])
def test_characters_yaml_does_not_allow_are_located(text, where, what):
    with pytest.raises(ConfigError) as info:
        parse_yaml(text, "ctl.yaml")
    (p,) = info.value.problems
    assert (p.file, p.line, p.column) == ("ctl.yaml", *where)
    assert what in p.message and "not allowed in YAML" in p.message


def test_a_fifo_is_refused_without_blocking(tmp_path):
    import os

    from hpcjobs.config.yamlio import read_yaml

    fifo = tmp_path / "exp.yaml"
    os.mkfifo(fifo)  # no writer: an open() for reading would block forever
    with pytest.raises(ConfigError) as info:
        read_yaml(fifo)
    assert "this is a FIFO (named pipe), not a regular file" in str(info.value)


@pytest.mark.parametrize(("target", "kind"), [("/dev/zero", "a character device"), (".", "a directory")])
def test_devices_and_directories_are_refused(tmp_path, target, kind):
    from hpcjobs.config.yamlio import read_yaml

    link = tmp_path / "exp.yaml"
    link.symlink_to(tmp_path if target == "." else target)
    with pytest.raises(ConfigError) as info:
        read_yaml(link)
    assert f"this is {kind}, not a regular file" in str(info.value)


def test_files_over_the_size_limit_are_refused_before_reading(tmp_path):
    from hpcjobs.config.yamlio import MAX_FILE_BYTES, YamlLimitError, read_yaml

    big = tmp_path / "big.yaml"
    with big.open("wb") as fh:
        fh.truncate(MAX_FILE_BYTES + 1)  # sparse: no disk used
    with pytest.raises(YamlLimitError) as info:
        read_yaml(big)
    assert f"the file is {MAX_FILE_BYTES + 1:,} bytes, over the limit of {MAX_FILE_BYTES:,} bytes" in str(info.value)


def test_invalid_utf8_is_located_by_line_and_column(tmp_path):
    from hpcjobs.config.yamlio import read_yaml

    path = tmp_path / "latin1.yaml"
    path.write_bytes("name: x\ncommand: echo café\n".encode("latin-1"))
    with pytest.raises(ConfigError) as info:
        read_yaml(path)
    (p,) = info.value.problems
    assert (p.line, p.column) == (2, 18)
    assert "not valid UTF-8: byte 0xe9 at byte offset 25" in p.message
    path.write_bytes("name: x\n".encode("utf-16"))
    with pytest.raises(ConfigError, match="it looks like UTF-16"):
        read_yaml(path)


def test_a_byte_order_mark_is_accepted(tmp_path):
    from hpcjobs.config.yamlio import read_yaml

    path = tmp_path / "bom.yaml"
    path.write_bytes(b"\xef\xbb\xbfname: x\ncommand: y\n")
    doc = read_yaml(path)
    assert doc.data == {"name": "x", "command": "y"}
    assert doc.positions[("command",)] == (2, 1)


def test_set_values_over_the_limits_are_refused_not_kept_as_text(tmp_path):
    path = _write(tmp_path, "name: t\ncommand: x\n")
    with pytest.raises(ConfigError) as info:
        load_experiment(path, ["params.n=" + "9" * 5000])
    (p,) = info.value.problems
    assert (p.file, p.key) == ("--set", "params.n")
    assert "5,000 digits is over the limit of 100" in p.message
