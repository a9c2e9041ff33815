"""The distribution check's evidence: per sampled token the numbers its statistics read.

The check has two phases. The evidence phase (``collect``: torch and the oracle) turns each
judged token into a few numbers: its probability under the target, the probability mass
before it in descending-probability order (ties by id) and in id order, the precision
envelope ``eps``, and whether its top-k/top-p membership is ambiguous; and, for the
prefix token-count tests, the cell probabilities of the candidate prefixes. The judge phase
(``analysis``: plain Python) computes every sub-test from those numbers alone. Bundles store
the evidence (``<scenario>/<run>.distribution.json``), so ``specseed check`` re-judges the
distribution on a machine with no model and no torch.

This module is what both phases share, and imports neither torch nor the oracle: the
sampling setup, the grouping of sampled requests, the choice of candidate prefixes (a
function of tokens only), the evidence file's models (pydantic, ``extra="forbid"``: a
bundle is untrusted input, so every number is checked finite and in range and every length
against the others), and :func:`mismatch`, which compares stored evidence with the trace it
claims to describe.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

UNIT_ROUNDOFF = {"float32": 2.0**-24, "float16": 2.0**-11, "bfloat16": 2.0**-8}
"""Unit roundoff of each logits dtype: the precision envelope's ``u`` (the distribution
check's per-token envelope and the near-tie envelope of ``checks/near_ties.py``)."""

if TYPE_CHECKING:
    from specseed.traces.records import RowRecord

EVIDENCE_FORMAT = "1"
MIN_SAMPLES = 20
"""Fewer sampled requests in a group than this are too few to test."""
MIN_PREFIX_SAMPLES = 40
MAX_PREFIX_TESTS = 16
MIN_CELL = 5.0
"""Chi-square cells expected below this are pooled."""
_SUM_SLACK = 1e-6
"""How far above 1 a stored probability sum may read (float64 sums of float64 rows)."""


@dataclass(frozen=True)
class SamplingSetup:
    """How a request samples: what turns logits into its next-token distribution."""

    temperature: float
    top_k: int
    top_p: float


@dataclass(frozen=True)
class Sample:
    """One sampled request as the engine served it."""

    request_id: str
    prompt_ids: tuple[int, ...]
    setup: SamplingSetup
    tokens: tuple[int, ...]
    steps: tuple[RowRecord, ...] = ()
    """The request's recorded rows, in step order, for the step-aware sub-tests (never part
    of the evidence: the trace holds them; empty: no step-aware sub-tests)."""


def judged_groups(samples: Sequence[Sample]) -> list[tuple[int, list[Sample]]]:
    """The groups the check tests (same prompt and setup, at least ``MIN_SAMPLES`` requests,
    at least one token each), each with its number among all groups in trace order (the
    number seeds the group's PIT noise)."""
    groups: dict[tuple[tuple[int, ...], SamplingSetup], list[Sample]] = {}
    for sample in samples:
        groups.setdefault((sample.prompt_ids, sample.setup), []).append(sample)
    return [
        (number, members)
        for number, members in enumerate(groups.values())
        if len(members) >= MIN_SAMPLES and min(len(m.tokens) for m in members) >= 1
    ]


def prefix_candidates(
    rows: Sequence[Sequence[int]], length: int
) -> list[tuple[int, tuple[int, ...], list[int]]]:
    """The prefix token-count tests of a group: ``(position, prefix, member rows)`` for
    position 0 and then the most frequent prefixes (at least ``MIN_PREFIX_SAMPLES``
    requests) at the earliest positions, ``MAX_PREFIX_TESTS`` in all."""
    # Requests sharing a prefix at t share a class id; position t + 1 refines the classes by
    # token t. Linear in the tokens (building every prefix tuple would be quadratic in the
    # length), and classes are numbered in order of first appearance, as the prefixes were.
    candidates: list[tuple[int, int, int, list[int]]] = []
    classes = [0] * len(rows)
    for t in range(length):
        if t:
            renumber: dict[tuple[int, int], int] = {}
            classes = [
                renumber.setdefault((c, row[t - 1]), len(renumber))
                for c, row in zip(classes, rows, strict=True)
            ]
        members: dict[int, list[int]] = {}
        for i, c in enumerate(classes):
            members.setdefault(c, []).append(i)
        for rows_with in members.values():
            if len(rows_with) >= MIN_PREFIX_SAMPLES or t == 0:
                candidates.append((t, -len(rows_with), rows_with[0], rows_with))
    candidates.sort(key=lambda c: (c[0] != 0, c[1], c[0]))
    return [
        (t, tuple(rows[first][:t]), rows_with)
        for t, _, first, rows_with in candidates[:MAX_PREFIX_TESTS]
    ]


# -- the evidence file ------------------------------------------------------------------------

Probability = Annotated[float, Field(ge=0.0, le=1.0 + _SUM_SLACK)]
TokenId = Annotated[int, Field(ge=0, lt=1 << 31)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class PrefixCells(_Strict):
    """One prefix token-count test: the exact conditional at ``position`` after the prefix
    (``prefix_candidates`` names it), as the cells the test counts."""

    position: int = Field(ge=0)
    cells: tuple[tuple[TokenId, Probability], ...] = Field(
        description="(token, probability) for every token the prefix's requests are expected "
        "to emit at least 5 times, by token id."
    )
    rest: Probability = Field(description="The probability of every other token, summed.")

    @model_validator(mode="after")
    def _sums(self) -> PrefixCells:
        ids = [token for token, _ in self.cells]
        if ids != sorted(set(ids)):
            raise ValueError("cells must name distinct tokens in increasing order")
        if sum(p for _, p in self.cells) + self.rest > 1.0 + _SUM_SLACK:
            raise ValueError("cell probabilities sum to more than 1")
        return self


class GroupEvidence(_Strict):
    """The evidence of one group of requests (same prompt and setup). Per-token lists are
    flat, request by request, ``length`` tokens each."""

    number: int = Field(ge=0, description="The group's number among the run's groups.")
    request_ids: tuple[str, ...] = Field(min_length=1)
    prompt_ids: tuple[TokenId, ...]
    temperature: float = Field(gt=0.0)
    top_k: int = Field(ge=0)
    top_p: float = Field(gt=0.0, le=1.0)
    length: int = Field(ge=1, description="Tokens judged per request (the shortest output).")
    tokens: tuple[tuple[TokenId, ...], ...]
    probability: tuple[Probability, ...] = Field(description="Each token's probability.")
    mass_before: tuple[Probability, ...] = Field(
        description="Probability of the tokens before it in descending-probability order "
        "(ties by id)."
    )
    mass_before_id: tuple[Probability, ...] = Field(
        description="Probability of the tokens with a smaller id."
    )
    envelope: tuple[Probability, ...] = Field(
        description="Precision envelope eps (TV between the oracle's and the engine's "
        "distribution)."
    )
    ambiguous: tuple[int, ...] = Field(
        (),
        description="Flat indices of tokens whose top-k/top-p membership the envelope makes "
        "ambiguous.",
    )
    prefixes: tuple[PrefixCells, ...] = ()

    @property
    def setup(self) -> SamplingSetup:
        return SamplingSetup(self.temperature, self.top_k, self.top_p)

    @model_validator(mode="after")
    def _shapes(self) -> GroupEvidence:
        requests = len(self.request_ids)
        if len(self.tokens) != requests:
            raise ValueError(f"{len(self.tokens)} token rows for {requests} requests")
        if any(len(row) != self.length for row in self.tokens):
            raise ValueError(f"a token row is not {self.length} tokens long")
        cells = requests * self.length
        for name in ("probability", "mass_before", "mass_before_id", "envelope"):
            if len(getattr(self, name)) != cells:
                raise ValueError(f"{name} holds {len(getattr(self, name))} values, not {cells}")
        for name in ("mass_before", "mass_before_id"):
            for before, own in zip(getattr(self, name), self.probability, strict=True):
                if before + own > 1.0 + _SUM_SLACK:
                    raise ValueError(f"{name} plus the token's probability exceeds 1")
        if list(self.ambiguous) != sorted(set(self.ambiguous)) or any(
            not 0 <= i < cells for i in self.ambiguous
        ):
            raise ValueError("ambiguous must list distinct token indices in range, in order")
        return self


class DistributionEvidence(_Strict):
    """``<scenario>/<run>.distribution.json``: what the distribution check judged a run on."""

    evidence_format: str = EVIDENCE_FORMAT
    oracle: str = Field("", description="Where the probabilities came from.")
    logits_dtype: str = Field(description="The dtype the envelope was computed for.")
    groups: tuple[GroupEvidence, ...] = ()

    def to_json(self) -> str:
        return self.model_dump_json()


def mismatch(evidence: DistributionEvidence, samples: Sequence[Sample], dtype: str) -> str | None:
    """Why ``evidence`` does not describe these samples (the trace's sampled requests), or
    None when it does: the same groups, request ids, prompt ids, setups and emitted tokens,
    the same logits dtype, and the prefix tests the tokens call for."""
    if evidence.evidence_format.split(".")[0] != EVIDENCE_FORMAT:
        return f"evidence format {evidence.evidence_format!r} (this specseed reads 1)"
    if evidence.logits_dtype != dtype:
        return f"evidence for {evidence.logits_dtype} logits, the trace's are {dtype}"
    expected = judged_groups(samples)
    if len(evidence.groups) != len(expected):
        return f"{len(evidence.groups)} groups recorded, the trace has {len(expected)}"
    for group, (number, members) in zip(evidence.groups, expected, strict=True):
        ids = tuple(m.request_id for m in members)
        if group.number != number or group.request_ids != ids:
            return f"group {number}: the request ids differ from the trace's ({ids[0]}, ...)"
        first = members[0]
        if group.prompt_ids != first.prompt_ids:
            return f"{first.request_id}: the prompt ids differ from the trace's"
        if group.setup != first.setup:
            return f"{first.request_id}: the sampling setup differs from the trace's"
        length = min(len(m.tokens) for m in members)
        if group.length != length:
            return f"{first.request_id}: {group.length} tokens per request, the trace has {length}"
        for member, row in zip(members, group.tokens, strict=True):
            if tuple(row) != member.tokens[:length]:
                at = next(
                    i
                    for i, (a, b) in enumerate(zip(row, member.tokens[:length], strict=True))
                    if a != b
                )
                return f"{member.request_id}: the emitted tokens differ at position {at}"
        wanted = [t for t, _, _ in prefix_candidates(group.tokens, length)]
        if [p.position for p in group.prefixes] != wanted:
            return f"group {number}: the prefix tests do not match the emitted tokens"
    return None


def parse_evidence(data: Any) -> DistributionEvidence:
    """Validate a parsed JSON document as evidence (``pydantic.ValidationError`` if not)."""
    return DistributionEvidence.model_validate(data)
