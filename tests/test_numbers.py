"""The grammar of sizes, rates and counts (analysis.numbers): exact values written out here, the
refusals (bits for bytes, bare prefixes, unbounded text), and bounded cost on hostile text."""

import re

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from llmcalc.analysis import numbers

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("text, value", [
    ("80GiB", 80 * 2**30), ("80GB", 80 * 10**9), ("80 GB", 80 * 10**9), ("512MiB", 512 * 2**20),
    ("1.5GiB", 3 * 2**29), ("1e9B", 10**9), ("0.5KiB", 512), ("12kB", 12_000), ("12KB", 12_000), ("7B", 7),
    (".25KiB", 256), ("2PiB", 2 * 2**50),
])
def test_sizes(text, value):
    assert numbers.size(text) == value


@pytest.mark.parametrize("text, value", [
    ("3.35TB/s", 3_350_000_000_000), ("900GB/s", 900 * 10**9), ("400Gb/s", 50 * 10**9), ("1Gbit/s", None),
    ("25Gb/s", 3_125_000_000), ("1.5GiB/s", 3 * 2**29),
])
def test_rates(text, value):
    if value is None:
        with pytest.raises(numbers.NumberError):
            numbers.rate(text)
    else:
        assert numbers.rate(text) == value


@pytest.mark.parametrize("text, value", [
    ("989.4TFLOP/s", 989_400_000_000_000), ("2.5PFLOPS", 2_500_000_000_000_000), ("624TOPS", 624 * 10**12),
    ("1e15FLOP/s", 10**15),
])
def test_flop_rates(text, value):
    assert numbers.flop_rate(text) == value


@pytest.mark.parametrize("text, value", [("4096", 4096), ("128k", 131_072), ("128K", 131_072), ("1M", 1_048_576),
                                         (" 32 ", 32), ("0", 0)])
def test_counts(text, value):
    assert numbers.count(text) == value


@pytest.mark.parametrize("read, text, message", [
    (numbers.size, "80Gb", "is in bits (Gb); write GB for bytes"),
    (numbers.size, "100Mb", "is in bits (Mb); write MB for bytes"),
    (numbers.size, "80gb", "expects a number with a byte unit"),
    (numbers.size, "80", "needs a unit: 80GiB (2^30 bytes) or 80GB (10^9 bytes)"),
    (numbers.size, "24G", "needs a byte unit: GiB (binary) or GB (decimal)"),
    (numbers.size, "3TB/s", "is a rate"),
    (numbers.size, "100.7B", "is not a whole number of bytes"),
    (numbers.size, "0.1b", "is in bits"),
    (numbers.size, "1e99999999B", "has an exponent past 30"),
    (numbers.size, "1e-99999999B", "has an exponent past 30"),
    (numbers.size, "9" * 5000 + "B", "expects a number with its unit"),
    (numbers.size, "1" * 41 + "B", "has more than 40 digits"),
    (numbers.size, "-1GB", "expects a number with its unit"),
    (numbers.size, "1_000B", "expects a number with its unit"),
    (numbers.rate, "3.35TB", "expects a rate with its unit"),
    (numbers.rate, "1.1b/s", "is not a whole number of bytes per second"),
    (numbers.flop_rate, "989.4TiFLOP/s", "expects FLOP/s with a decimal prefix"),
    (numbers.flop_rate, "0.5FLOP/s", "is not a whole number of FLOP/s"),
    (numbers.count, "1.5k", "expects a whole number"),
    (numbers.count, "1e6", "expects a whole number"),
    (numbers.count, "1" * 41, "expects a whole number"),
    (numbers.count, "12G", "expects a whole number"),
])
def test_refused(read, text, message):
    with pytest.raises(numbers.NumberError, match="^" + re.escape(message)):
        read(text)


@given(st.text(max_size=200))
@example("-1")  # a count is read signed, for its caller to refuse as less than 1; a size or rate never
def test_any_text_is_read_or_refused(text):
    for read in (numbers.size, numbers.rate, numbers.flop_rate, numbers.count):
        try:
            value = read(text)
        except numbers.NumberError:
            continue
        least = -(10**80) if read is numbers.count else 0
        assert isinstance(value, int) and least <= value < 10**80


PREFIXES = {"": 1, "k": 1000, "K": 1000, "M": 1000**2, "G": 1000**3, "T": 1000**4, "P": 1000**5,
            "Ki": 1024, "Mi": 1024**2, "Gi": 1024**3, "Ti": 1024**4, "Pi": 1024**5}


@given(st.integers(0, 10**12), st.sampled_from(sorted(PREFIXES)))
def test_a_whole_number_with_a_prefix_is_that_many_bytes(n, prefix):
    assert numbers.size(f"{n}{prefix}B") == n * PREFIXES[prefix]
    assert numbers.rate(f"{n}{prefix}B/s") == n * PREFIXES[prefix]
    assert numbers.rate(f"{8 * n}{prefix}b/s") == n * PREFIXES[prefix]
