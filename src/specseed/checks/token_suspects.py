"""Suspects from tokens alone, for engines that expose nothing else (a server over HTTP).

Without RNG state or logits, a divergence can still point at a defect class through *what
changed between the two runs*: the same request twice on one server (an engine-wide stream,
or a seed lost on the way), earlier traffic, the seeds or seededness of the neighbours, the
request's row, the overlap scheduler, speculation. Each comparison check states its own rule
(``@comparison_check(..., token_suspects=...)``: it knows what its runs vary); this module
holds what the rules read. A rule's answer stays a suspect, not a verdict: tokens cannot tell
a dropped seed from an ignored one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from specseed.checks.findings import Suspect, TokenDiff
from specseed.traces.records import RequestInfo, RunTrace


@dataclass(frozen=True)
class TokenDivergence:
    """A divergence seen in tokens only, as a check's token-suspect rule reads it."""

    diff: TokenDiff
    left: RunTrace
    right: RunTrace
    compared: frozenset[str]
    """The requests the expectation compares (the others are neighbours)."""

    @property
    def request(self) -> RequestInfo:
        return self.left.request(self.diff.request)

    @property
    def seeded(self) -> bool:
        """A sampled request with a seed of its own."""
        return self.request.seed is not None and self.request.temperature > 0

    @property
    def what(self) -> str:
        """The request and its seed (or greedy), for the suspect's line."""
        seed = self.request.seed
        return f"{self.diff.request} ({'seed ' + str(seed) if self.seeded else 'greedy'})"

    @property
    def where(self) -> str:
        """The first divergent token and the two runs."""
        diff = self.diff
        return f"token {diff.position} ({diff.left.run} vs {diff.right.run})"

    def sampled_neighbours(self, trace: RunTrace) -> bool:
        """Whether ``trace`` served a sampled request besides this one (any compared one
        included): requests a kernel call could share."""
        return any(
            info.phase == "scenario"
            and info.request_id != self.diff.request
            and info.temperature > 0
            for info in trace.header.requests
        )

    def unseeded_neighbours(self, trace: RunTrace) -> bool:
        """Whether ``trace`` served a sampled, unseeded request besides the compared ones."""
        return any(
            info.phase == "scenario"
            and info.request_id not in self.compared
            and info.seed is None
            and info.temperature > 0
            for info in trace.header.requests
        )


TokenSuspectRule = Callable[[TokenDivergence], list[Suspect]]
"""A comparison check's suspects for a token-only divergence."""


def token_suspects(
    rule: TokenSuspectRule | None,
    diff: TokenDiff,
    left: RunTrace,
    right: RunTrace,
    compared: set[str],
) -> list[Suspect]:
    """The defect classes a token-only divergence fits, by the comparing check's ``rule``."""
    if rule is None:
        return []
    return rule(TokenDivergence(diff, left, right, frozenset(compared)))
