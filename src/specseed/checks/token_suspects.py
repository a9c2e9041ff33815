"""Suspects from tokens alone, for engines that expose nothing else (a server over HTTP).

Without RNG state or logits, a divergence can still point at a defect class through *what
changed between the two runs*: the same request twice on one server (an engine-wide stream,
or a seed lost on the way), earlier traffic, the seeds or seededness of the neighbours, the
request's row, the overlap scheduler, speculation. Each rule says which comparison it reads
and stays a suspect, not a verdict: tokens cannot tell a dropped seed from an ignored one.
"""

from __future__ import annotations

from specseed.checks.findings import Suspect, TokenDiff
from specseed.traces.records import RequestInfo, RunTrace


def _neighbours(trace: RunTrace, compared: set[str]) -> list[RequestInfo]:
    return [
        info
        for info in trace.header.requests
        if info.phase == "scenario" and info.request_id not in compared
    ]


def _unseeded(infos: list[RequestInfo]) -> bool:
    return any(i.seed is None and i.temperature > 0 for i in infos)


def token_suspects(
    check_id: str,
    diff: TokenDiff,
    left: RunTrace,
    right: RunTrace,
    compared: set[str],
) -> list[Suspect]:
    """The defect classes a token-only divergence of ``check_id`` fits."""
    request = left.request(diff.request)
    seeded = request.seed is not None and request.temperature > 0
    what = f"{diff.request} ({'seed ' + str(request.seed) if seeded else 'greedy'})"
    where = f"token {diff.position} ({diff.left.run} vs {diff.right.run})"
    if check_id == "run-to-run" and seeded:
        return [
            Suspect(
                "engine-counter",
                f"{what} differs at {where} between two identical runs: its seed does not "
                "decide its stream (the engine ignores it, or a proxy drops it)",
            )
        ]
    if check_id == "uptime-invariance":
        return [
            Suspect(
                "engine-counter",
                f"{what} differs at {where} after earlier traffic: the stream depends on how "
                "much the engine served before",
            )
        ]
    if check_id == "batch-invariance":
        found: list[Suspect] = []
        before, after = _neighbours(left, compared), _neighbours(right, compared)
        if seeded and _unseeded(before) != _unseeded(after):
            found.append(
                Suspect(
                    "neighbor-unseeded",
                    f"{what} differs at {where}, and only one side had an unseeded neighbour",
                )
            )
        if seeded and not found:
            found.append(
                Suspect(
                    "row0-seed",
                    f"{what} differs at {where} when only its neighbours changed: its draws "
                    "follow another row's seed",
                )
            )
        return found
    if check_id == "position-invariance" and seeded:
        return [
            Suspect(
                "row-subsequence",
                f"{what} differs at {where} when only its batch row changed",
            )
        ]
    if check_id == "overlap-invariance" and seeded:
        return [
            Suspect(
                "overlap-window-reuse",
                f"{what} differs at {where} with the overlap scheduler on",
            )
        ]
    if check_id == "greedy-spec-equivalence":
        return [
            Suspect(
                "greedy-drift",
                f"{diff.request} (greedy) differs at {where} with and without speculation",
            )
        ]
    return []
