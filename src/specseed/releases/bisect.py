"""Bisecting a range of releases: which release to run next, so that the sweep finds where
the verdict changes with as few installations as the answer needs.

The newest and the oldest release run first (a release without a verdict, one that cannot be
installed or cannot run the audit's settings, is stepped over to its inner neighbour, as
``git bisect skip`` does). When their verdicts agree there is nothing to find. Otherwise the
cells whose verdict (failing or not) differs between them are the change looked for, and a
release counts as *changed* when one of those cells has the newest release's verdict. The
releases between the last unchanged and the first changed one are halved until they are
neighbours, or every release between them is without a verdict (the change is then in one
of those, and the sweep says so).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from specseed.releases.spec import Release
from specseed.releases.table import ReleaseOutcome, failing, target_cells


def _changed(outcome: ReleaseOutcome, newest: ReleaseOutcome, cells: set[tuple[str, str]]) -> bool:
    """Whether one of the cells that tell the ends apart has the newest release's verdict."""
    for key in cells:
        here, there = outcome.cell(*key), newest.cell(*key)
        if here is not None and there is not None and failing(here) == failing(there):
            return True
    return False


def next_release(
    releases: Sequence[Release], outcomes: Mapping[str, ReleaseOutcome]
) -> Release | None:
    """The next release to run (``releases`` oldest first; ``outcomes`` by version, the
    ones run so far), or None when the change is found or there is none."""
    tried = set(outcomes)
    judged = [
        i for i, r in enumerate(releases) if r.version in outcomes and outcomes[r.version].judged
    ]
    # The ends: the newest release with a verdict, then the oldest.
    if not judged:
        return next((r for r in reversed(releases) if r.version not in tried), None)
    top = judged[-1]
    if any(r.version not in tried for r in releases[top + 1 :]):
        return next(r for r in reversed(releases) if r.version not in tried)
    if len(judged) == 1:
        return next((r for r in releases[:top] if r.version not in tried), None)
    bottom = judged[0]
    if any(r.version not in tried for r in releases[:bottom]):
        return next(r for r in releases if r.version not in tried)
    newest, oldest = outcomes[releases[top].version], outcomes[releases[bottom].version]
    cells = target_cells(oldest, newest)
    if not cells:
        return None
    first_changed = next(
        i for i in judged if i > bottom and _changed(outcomes[releases[i].version], newest, cells)
    )
    last_unchanged = max(
        i
        for i in judged
        if i < first_changed and not _changed(outcomes[releases[i].version], newest, cells)
    )
    between = [
        i for i in range(last_unchanged + 1, first_changed) if releases[i].version not in tried
    ]
    if not between:
        return None
    middle = (last_unchanged + first_changed) / 2
    return releases[min(between, key=lambda i: (abs(i - middle), i))]


__all__ = ["next_release"]
