"""Findings: what a check concludes, with the evidence a user needs to act on it.

All records are frozen dataclasses so reporters can serialise them as they are
(``dataclasses.asdict``) and never decide a verdict themselves.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from specseed.core.contracts import EventKind

Status = Literal["pass", "fail", "known-limitation", "error", "skip"]
STATUSES: tuple[Status, ...] = ("pass", "fail", "known-limitation", "error", "skip")
FAILING: frozenset[str] = frozenset({"fail", "error"})
"""Statuses that make the audit exit 1."""

Attribution = Literal[
    "rng-state", "logits", "rng-state-and-logits", "sampler", "logits-unobserved", "tokens-only"
]
ATTRIBUTION_TEXT: dict[str, str] = {
    "rng-state": "RNG state differs",
    "logits": "logits differ (numerics)",
    "rng-state-and-logits": "RNG state and logits differ",
    "sampler": "same RNG state and logits, yet different token (sampler defect)",
    "logits-unobserved": "same RNG state; the engine does not expose logits (numerics or "
    "the sampler)",
    "tokens-only": "tokens differ; the engine exposes neither RNG state nor logits",
}


@dataclass(frozen=True)
class Suspect:
    """A defect class that fits the evidence."""

    defect: str
    """Defect id from the catalogue (``specseed.core.defects``)."""
    why: str
    """One line: the evidence that points at it."""


@dataclass(frozen=True)
class EventState:
    """The Philox state of one sampling event, as shown in diffs and tables."""

    kind: EventKind
    index: int
    kernel: str
    kernel_row: int
    seed: int
    subsequence: int
    offset: int
    draws: int
    step: int
    decoding_iter: int

    def label(self) -> str:
        name = {"target": "target", "accept": "accept", "draft": "draft"}[self.kind]
        return f"{name}[{self.index}]" if self.kind != "accept" else name

    def triple(self) -> tuple[int, int, int]:
        return (self.seed, self.subsequence, self.offset)


@dataclass(frozen=True)
class StreamSide:
    """One side of a token-stream diff."""

    run: str
    tokens: tuple[int, ...]
    """The request's tokens in a window around the first divergence."""
    step: int
    """Engine step that emitted the divergent token (-1 if the stream ended before it)."""
    row: int
    decoding_iter: int
    logits_fingerprint: str
    events: tuple[EventState, ...]
    """Sampling events behind the divergent token (its step's, and the drafts it verified)."""


NEAR_TIE = "numerics: near-tie"
"""How a greedy divergence inside the numeric envelope is reported (and recognised)."""


@dataclass(frozen=True)
class Margin:
    """At a greedy divergence, how far apart the two candidate tokens were: the logit of the
    token one side emitted against the other's, with the numeric envelope they are judged
    against (``checks/near_ties.py``)."""

    tokens: tuple[int, int]
    """The token each side emitted (left, right)."""
    margin: float
    """|logit(left token) - logit(right token)| at the common prefix."""
    scale: float
    """The row's largest |logit|."""
    envelope: float
    """The largest margin the stated numerics can flip: 2 (u + oracle error) * scale."""
    logits_dtype: str
    """The dtype whose unit roundoff u the envelope uses (the trace's, else bfloat16)."""
    source: str
    """Where the logits came from: ``oracle`` (the target recomputed teacher-forced), or
    ``engine logprobs``."""

    @property
    def near_tie(self) -> bool:
        return self.margin <= self.envelope

    def text(self) -> str:
        if self.near_tie:
            return (
                f"{NEAR_TIE}, margin {self.margin:.3g} within the envelope "
                f"{self.envelope:.3g} ({self.logits_dtype} logits, scale {self.scale:.3g}, "
                f"{self.source})"
            )
        return (
            f"margin {self.margin:.3g} outside the numeric envelope {self.envelope:.3g} "
            f"({self.logits_dtype} logits, {self.source}): not a near-tie"
        )


@dataclass(frozen=True)
class TokenDiff:
    """The first divergence of one request between two runs (or two requests of one run)."""

    request: str
    position: int
    """Index of the first differing output token."""
    window_start: int
    """Output index of ``left.tokens[0]`` and ``right.tokens[0]``."""
    left: StreamSide
    right: StreamSide
    attribution: Attribution
    right_request: str | None = None
    """Set when the two sides are different requests of the same run."""
    first_state_difference: tuple[EventState | None, EventState | None] | None = None
    """The earliest sampling event of the request whose state differs between the sides
    (None where the histories agree up to the divergent token). Acceptance can hide an early
    RNG difference for several tokens, so this, not the token's own events, is the cause."""
    margin: Margin | None = None
    """For a greedy request whose logits may differ: the two candidates' margin (None where
    not measured: a sampled request, identical logits, or no logits to measure with)."""

    def event_keys(self) -> list[tuple[str, int]]:
        """The (kind, index) of every sampling event behind the divergent token on either
        side, draft events first, then target, then accept, each by index: the rows every
        rendering of the RNG state shows."""
        return sorted(
            {(e.kind, e.index) for e in (*self.left.events, *self.right.events)},
            key=lambda k: (["draft", "target", "accept"].index(k[0]), k[1]),
        )


@dataclass(frozen=True)
class OffsetRow:
    """One sampling event's state: expected by the contract beside observed."""

    request: str
    run: str
    step: int
    decoding_iter: int
    event: str
    """``target[j]``, ``accept`` or ``draft[i]``."""
    expected_seed: int | None
    expected_subsequence: int | None
    expected_offset: int | None
    seed: int
    subsequence: int
    offset: int
    draws: int
    mismatch: tuple[str, ...]
    """Which of seed / subsequence / offset differ from the contract."""


@dataclass(frozen=True)
class Finding:
    """What one check concluded about one scenario (one run, or runs compared).

    Checks leave ``check`` and ``scenario`` empty: the runner stamps them from the registry
    and the scenario, so no check repeats its own id.
    """

    status: Status
    message: str
    """One line a user reads first."""
    runs: tuple[str, ...] = ()
    requests: tuple[str, ...] = ()
    """Requests the finding is about (the affected ones when it fails)."""
    suspects: tuple[Suspect, ...] = ()
    diffs: tuple[TokenDiff, ...] = ()
    offsets: tuple[OffsetRow, ...] = ()
    limitation: str | None = None
    """For known-limitation: the contract's stated reason."""
    details: tuple[str, ...] = field(default=())
    """Further evidence lines (exception text, overlapping ranges...)."""
    suspect_groups: tuple[tuple[str, ...], ...] = ()
    """Where the finding holds several pieces of evidence (diffs), the defects that fit each:
    attribution must explain every group (empty: ``suspects`` is one group)."""
    check: str = ""
    """The check's id (stamped from the registry)."""
    scenario: str = ""
    """The scenario's name (stamped by the runner)."""
