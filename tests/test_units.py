import pytest

from hpcjobs.units import (
    MAX_MEMORY_BYTES,
    MAX_WALLTIME_SECONDS,
    format_memory_human,
    format_memory_pbs,
    format_memory_slurm,
    format_walltime_pbs,
    format_walltime_slurm,
    parse_memory,
    parse_walltime,
)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("02:00:00", 7200),
        ("1-00:00:00", 86400),
        ("1-12", 129600),
        ("2-06:30", 196200),
        ("30:00", 1800),
        ("72:00:00", 259200),
        ("90m", 5400),
        ("2h", 7200),
        ("1.5d", 129600),
        ("45s", 45),
        (60, 3600),  # a bare integer is minutes, as in Slurm
    ],
)
def test_parse_walltime(text, seconds):
    assert parse_walltime(text) == seconds


@pytest.mark.parametrize("bad", ["", "abc", "1:60:00", "00:00:00", "2 weeks", "-5m", True])
def test_parse_walltime_rejects(bad):
    with pytest.raises(ValueError):
        parse_walltime(bad)


def test_format_walltime_per_scheduler():
    assert format_walltime_slurm(7200) == "02:00:00"
    assert format_walltime_slurm(259200 + 61) == "3-00:01:01"
    assert format_walltime_pbs(259200 + 61) == "72:01:01"


@pytest.mark.parametrize(
    ("text", "nbytes"),
    [("16G", 16 * 1024**3), ("16GB", 16 * 1024**3), ("16GiB", 16 * 1024**3), ("512M", 512 * 1024**2),
     ("1.5T", int(1.5 * 1024**4)), ("100b", 100), ("2k", 2048)],
)
def test_parse_memory(text, nbytes):
    assert parse_memory(text) == nbytes


@pytest.mark.parametrize("bad", ["16", "lots", "16 X", "-1G"])
def test_parse_memory_rejects(bad):
    with pytest.raises(ValueError):
        parse_memory(bad)


def test_format_memory_per_scheduler():
    assert format_memory_slurm(16 * 1024**3) == "16G"
    assert format_memory_pbs(16 * 1024**3) == "16gb"
    assert format_memory_slurm(1536 * 1024**2) == "1536M"
    assert format_memory_pbs(1536 * 1024**2) == "1536mb"
    assert format_memory_slurm(1024**4) == "1T"
    assert format_memory_slurm(1000) == "1M"  # rounded up to Slurm's smallest unit
    assert format_memory_pbs(1000) == "1kb"
    assert format_memory_human(int(1.5 * 1024**4)) == "1.5T"


@pytest.mark.parametrize("text", ["9" * 400 + "G", "9" * 5000 + "M", "1." + "5" * 400 + "T"])
def test_parse_memory_refuses_absurd_digit_counts_with_a_value_error(text):
    # float("9" * 400) is inf and round(inf) raised OverflowError: a traceback instead of a message
    with pytest.raises(ValueError, match=r"a number with \d+ digits .* over the limit of 20"):
        parse_memory(text)


def test_parse_memory_maximum_is_one_exbibyte():
    assert MAX_MEMORY_BYTES == 1024**6
    assert parse_memory("1024P") == 1024**6
    assert parse_memory(1024**6) == 1024**6
    for over in ("1025P", "1048577T", 1024**6 + 1):
        with pytest.raises(ValueError, match=r"over the maximum of 1024P"):
            parse_memory(over)


def test_parse_memory_decimal_sizes_are_exact():
    assert parse_memory("1.5T") == 3 * 1024**4 // 2
    assert parse_memory("0.25G") == 256 * 1024**2


@pytest.mark.parametrize("text", ["9" * 400 + "h", "9" * 400 + ":00:00", "1-" + "9" * 30, "1." + "0" * 30 + "1d"])
def test_parse_walltime_refuses_absurd_digit_counts_with_a_value_error(text):
    with pytest.raises(ValueError, match=r"a number with \d+ digits .* over the limit of 20"):
        parse_walltime(text)


def test_parse_walltime_maximum_is_a_hundred_years():
    assert parse_walltime("36500d") == MAX_WALLTIME_SECONDS == 36500 * 86400
    assert parse_walltime(36500 * 1440) == MAX_WALLTIME_SECONDS  # a bare integer is minutes
    for over in ("36501d", "876001h", "36500-00:00:01", 36500 * 1440 + 1):
        with pytest.raises(ValueError, match=r"over the maximum of 36500 days"):
            parse_walltime(over)


def test_long_values_are_cut_short_in_messages():
    with pytest.raises(ValueError) as info:
        parse_walltime("x" * 5000)
    assert len(str(info.value)) < 200
