"""Counted nouns for messages: "1 pair", "2 pairs", never "1 pairs"."""

from __future__ import annotations


def plural(count: int, noun: str, plural_form: str | None = None) -> str:
    """``count`` and ``noun``, the noun in the plural unless the count is exactly 1.

    ``noun`` may be several words ("sampling event"); the last one takes the plural.
    """
    if count == 1:
        return f"1 {noun}"
    return f"{count} {plural_form or noun + 's'}"
