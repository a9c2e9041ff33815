"""Counted nouns for messages: "1 pair", "2 pairs", never "1 pairs"."""

from __future__ import annotations


def plural(count: int, noun: str, plural_form: str | None = None) -> str:
    """``count`` and ``noun``, the noun in the plural unless the count is exactly 1.

    ``noun`` may be several words ("sampling event"); the last one takes the plural.
    """
    if count == 1:
        return f"1 {noun}"
    return f"{count} {plural_form or noun + 's'}"


def one_of(kind: str, value: str, known: tuple[str, ...]) -> str:
    """``value`` if it is in ``known``; else ``ValueError`` with "did you mean" (for
    validators: pydantic turns it into a field error)."""
    import difflib

    if value not in known:
        close = difflib.get_close_matches(value, known, n=1)
        listed = f"Expected one of: {', '.join(known)}."
        # A short list is worth showing even with a suggestion ('vllm' is close to 'trtllm').
        fix = f"Did you mean {close[0]!r}?" if close else listed
        if close and len(known) <= 4:
            fix += " " + listed
        raise ValueError(f"unknown {kind} {value!r}. {fix}")
    return value
