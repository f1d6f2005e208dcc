"""The command line's argument types: numbers within their bounds, label scales, a file's column names and
label words. Each refuses a bad value at parse (argparse's exit 2) with what it expected.

Owns: parsing option values. Must not load data or build metrics (``judges_app.cli.common``).
"""

from __future__ import annotations

import argparse
import math

from judges.data.samples import MultiTurnSample, SingleTurnSample

def label_range(text: str) -> tuple[float, float]:
    """An argparse type: "LOW,HIGH", e.g. "1,5"."""
    try:
        low, high = (float(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected LOW,HIGH such as 1,5; got {text!r}") from None
    if not (math.isfinite(low) and math.isfinite(high) and low < high):
        raise argparse.ArgumentTypeError(f"expected finite LOW < HIGH, got {text!r}")
    return low, high


def _pairs(text: str, what: str) -> list[tuple[str, str]]:
    """``"a=b,c=d"`` as pairs; the argparse error names ``what`` was expected."""
    pairs = []
    for part in text.split(","):
        key, equals, value = part.partition("=")
        if not equals or not key.strip() or not value.strip():
            raise argparse.ArgumentTypeError(f"expected {what}, got {part!r} in {text!r}")
        pairs.append((key.strip(), value.strip()))
    return pairs


def column_map(text: str) -> dict[str, str]:
    """An argparse type: ``THEIRS=OURS,...``, your file's columns as sample fields (or label, rationale)."""
    fields = set(SingleTurnSample.model_fields) | set(MultiTurnSample.model_fields) | {"label", "rationale"}
    mapping = dict(_pairs(text, "THEIRS=OURS such as bot_reply=response"))
    unknown = sorted(set(mapping.values()) - fields)
    if unknown:
        raise argparse.ArgumentTypeError(f"{', '.join(unknown)} is not a sample field; fields: {', '.join(sorted(fields))}")
    return mapping


def label_words(text: str) -> dict[str, float]:
    """An argparse type: ``WORD=VALUE,...``, your label words as numbers (``faithful=1,hallucinated=0``)."""
    words = {}
    for word, value in _pairs(text, "WORD=NUMBER such as faithful=1"):
        try:
            number = float(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{word}={value}: {value!r} is not a number") from None
        words[word] = int(number) if number.is_integer() else number
    return words


def _checked_number(text: str, convert, accept, expected: str):
    """``convert(text)`` when ``accept`` holds for it, else the argparse error saying what was ``expected``."""
    try:
        value = convert(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}") from None
    if not accept(value):
        raise argparse.ArgumentTypeError(f"expected {expected}, got {text}")
    return value


def positive_int(text: str) -> int:
    """An argparse type: a whole number >= 1."""
    return _checked_number(text, int, lambda v: v >= 1, "a whole number >= 1")


#: The most bootstrap resamples a command takes (``--n-bootstrap``): 100,000 keep a CI's third decimal steady.
MAX_BOOTSTRAP = 100_000


#: The longest ``--timeout`` a command takes, in seconds (a day).
MAX_TIMEOUT = 86_400.0


def bootstrap_count(text: str) -> int:
    """An argparse type: bootstrap resamples, 1 to ``MAX_BOOTSTRAP``."""
    return _checked_number(text, int, lambda v: 1 <= v <= MAX_BOOTSTRAP, f"a whole number from 1 to {MAX_BOOTSTRAP:,}")


def seed_value(text: str) -> int:
    """An argparse type: a random seed, 0 to 2**32 - 1 (what numpy's generators take)."""
    return _checked_number(text, int, lambda v: 0 <= v < 2**32, "a whole number from 0 to 4294967295")


def timeout_seconds(text: str) -> float:
    """An argparse type: seconds, more than 0 and at most ``MAX_TIMEOUT``."""
    return _checked_number(text, float, lambda v: math.isfinite(v) and 0 < v <= MAX_TIMEOUT,
                           f"a number of seconds above 0, at most {MAX_TIMEOUT:,.0f}")


def positive_number(text: str) -> float:
    """An argparse type: a finite number > 0 (e.g. seconds)."""
    return _checked_number(text, float, lambda v: math.isfinite(v) and v > 0, "a number > 0")


def share(text: str) -> float:
    """An argparse type: a number in [0, 1]."""
    return _checked_number(text, float, lambda v: 0.0 <= v <= 1.0, "a number between 0 and 1")


def table_file(text: str) -> str:
    """An argparse type: a file name ending in .md, .tex or .csv (the table's format)."""
    if not text.endswith((".md", ".tex", ".csv")):
        raise argparse.ArgumentTypeError(f"expected a .md, .tex or .csv file, got {text!r}")
    return text


def sizes_list(text: str) -> list[int]:
    """An argparse type: ``N,N,...``, whole numbers of at least 2 (numbers of labelled items)."""
    try:
        sizes = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected whole numbers such as 20,40, got {text!r}") from None
    if not sizes or min(sizes) < 2:
        raise argparse.ArgumentTypeError(f"expected whole numbers of at least 2 such as 20,40, got {text!r}")
    return sizes
