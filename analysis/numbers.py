"""One grammar for the numbers a user writes with a unit: sizes, rates and counts, alike in the
options, the hardware files and the API (the docs' "Numbers and units").

- A **size** is a number and a byte unit: ``80GB`` (10^9 bytes each), ``80GiB`` (2^30), ``512MiB``,
  ``1e9B``. ``B`` is a byte and ``b`` a bit: a size in bits (``80Gb``) is refused, never read as
  bytes; a bare prefix (``24G``) is refused as ambiguous.
- A **rate** is a size per second (``3.35TB/s``); links quoted in bits per second (``400Gb/s``) are
  converted to bytes when they come to whole bytes.
- A **FLOP rate** is a number and ``FLOP/s`` with a decimal prefix (``989.4TFLOP/s``).
- A **count** (tokens, sequences, GPUs) is a whole number, optionally with ``k`` (2^10) or ``M``
  (2^20): ``128k`` is 131,072 tokens, as context lengths are quoted.

Every value is exact: the decimal text is read as an integer ratio, never through a float, and its
length and exponent are bounded on the text before any number is built (``1e99999999B`` costs
nothing). A number that is not whole in its base unit is refused.
"""

import re

MAX_MANTISSA = 40  # digits before and after the point, together
MAX_EXPONENT = 30  # |e|: 1e30 bytes is far past any memory

DECIMAL = {"": 1, "k": 10**3, "K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15}
BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50}
COUNT_SUFFIX = {"": 1, "k": 2**10, "K": 2**10, "M": 2**20}

_NUMBER = r"\s*([0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE]([+-]?[0-9]+))?\s*"
_QUANTITY = _NUMBER + r"([A-Za-z]*)(/s)?\s*"  # compiled at the first number read (re caches it)
_FLOP_UNITS = ("FLOP/s", "FLOPS", "OP/s", "OPS")


class NumberError(ValueError):
    """Text that is not the number asked for; the message says what was expected."""


def _exact(digits: str, exponent: str | None) -> tuple[int, int]:
    """``digits`` (with at most one point) times 10^exponent as (numerator, denominator), or
    NumberError when either is longer than the bounds."""
    whole, _, frac = digits.partition(".")
    if len(whole.lstrip("0")) + len(frac) > MAX_MANTISSA:
        raise NumberError(f"has more than {MAX_MANTISSA} digits")
    if exponent is not None and (len(exponent.lstrip("+-")) > 3 or abs(int(exponent)) > MAX_EXPONENT):
        raise NumberError(f"has an exponent past {MAX_EXPONENT}")
    power = (int(exponent) if exponent else 0) - len(frac)
    mantissa = int(whole + frac or "0")
    return (mantissa * 10**power, 1) if power >= 0 else (mantissa, 10**-power)


def _whole(numerator: int, denominator: int, what: str) -> int:
    if numerator % denominator:
        raise NumberError(f"is not a whole number of {what}")
    return numerator // denominator


def _split(text: str, example: str) -> tuple[int, int, str, bool]:
    m = re.fullmatch(_QUANTITY, text) if len(text) <= 4 * MAX_MANTISSA else None
    if m is None:
        raise NumberError(f"expects a number with its unit, such as {example}")
    numerator, denominator = _exact(m.group(1), m.group(2))
    return numerator, denominator, m.group(3), m.group(4) is not None


def _bytes(numerator: int, denominator: int, unit: str, per_second: bool, example: str) -> int:
    """A byte count from a number and its unit (``GiB``, ``MB``, ``B``; ``Gb``: bits, only per second)."""
    prefix, last = unit[:-1], unit[-1:]
    scale = DECIMAL.get(prefix) or BINARY.get(prefix)
    if last == "b" and scale is not None:
        if not per_second:
            raise NumberError(f"is in bits ({unit}); write {prefix}B for bytes")
        return _whole(numerator * scale, denominator * 8, "bytes per second")
    if unit in DECIMAL and unit:
        raise NumberError(f"needs a byte unit: {unit}iB (binary) or {unit}B (decimal)")
    if last != "B" or scale is None:
        raise NumberError(f"expects a number with a byte unit, such as {example}")
    return _whole(numerator * scale, denominator, "bytes")


def size(text: str) -> int:
    """``'80GiB'`` -> 85_899_345_920 bytes."""
    numerator, denominator, unit, per_second = _split(text, "80GiB or 80GB")
    if not unit:
        number = text.strip() if len(text) <= 12 else "80"
        raise NumberError(f"needs a unit: {number}GiB (2^30 bytes) or {number}GB (10^9 bytes)")
    if per_second:
        raise NumberError("is a rate; a size has no /s")
    return _bytes(numerator, denominator, unit, False, "80GiB or 80GB")


def rate(text: str) -> int:
    """``'3.35TB/s'`` -> 3_350_000_000_000 bytes per second; ``'400Gb/s'`` -> 50_000_000_000."""
    numerator, denominator, unit, per_second = _split(text, "3.35TB/s")
    if not per_second:
        raise NumberError("expects a rate with its unit, such as 3.35TB/s")
    return _bytes(numerator, denominator, unit, True, "3.35TB/s")


def flop_rate(text: str) -> int:
    """``'989.4TFLOP/s'`` -> 989_400_000_000_000 FLOP/s."""
    numerator, denominator, unit, per_second = _split(text, "989.4TFLOP/s")
    unit += "/s" if per_second else ""
    prefix = next((unit[:-len(u)] for u in _FLOP_UNITS if unit.endswith(u)), None)
    if prefix not in DECIMAL:
        raise NumberError("expects FLOP/s with a decimal prefix, such as 989.4TFLOP/s")
    return _whole(numerator * DECIMAL[prefix], denominator, "FLOP/s")


def count(text: str) -> int:
    """``'4096'``, ``'128k'`` (131,072), ``'1M'`` (1,048,576): an integer, bounded in length (the
    caller bounds its value: a count of -1 is read, to be refused as less than 1)."""
    m = re.fullmatch(r"\s*([-+]?[0-9]{1,40})([kKM]?)\s*", text)
    if m is None:
        raise NumberError("expects a whole number such as 4096 or 128k")
    return int(m.group(1)) * COUNT_SUFFIX[m.group(2)]
