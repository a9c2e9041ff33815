"""Wording shared by every message: counted nouns ("1 pair", "2 pairs", never "1 pairs") and
the "did you mean" of an unknown name."""

from __future__ import annotations

from collections.abc import Iterable


def plural(count: int, noun: str, plural_form: str | None = None) -> str:
    """``count`` and ``noun``, the noun in the plural unless the count is exactly 1.

    ``noun`` may be several words ("sampling event"); the last one takes the plural.
    """
    return f"{count} {noun_for(count, noun, plural_form)}"


def noun_for(count: int, noun: str, plural_form: str | None = None) -> str:
    """``noun`` as ``plural`` writes it after ``count``, without the count ("requests a, b")."""
    return noun if count == 1 else plural_form or noun + "s"


def did_you_mean(value: str, known: Iterable[str], otherwise: str) -> str:
    """The fix for an unknown name: "Did you mean 'x'?" with the closest of ``known``, or
    ``otherwise`` (what to look at instead) when none is close."""
    import difflib

    close = difflib.get_close_matches(value, list(known), n=1)
    return f"Did you mean {close[0]!r}?" if close else otherwise


def one_of(kind: str, value: str, known: tuple[str, ...]) -> str:
    """``value`` if it is in ``known``; else ``ValueError`` with "did you mean" (for
    validators: pydantic turns it into a field error)."""
    if value not in known:
        listed = f"Expected one of: {', '.join(known)}."
        fix = did_you_mean(value, known, listed)
        # A short list is worth showing even with a suggestion ('vllm' is close to 'trtllm').
        if fix != listed and len(known) <= 4:
            fix += " " + listed
        raise ValueError(f"unknown {kind} {value!r}. {fix}")
    return value
