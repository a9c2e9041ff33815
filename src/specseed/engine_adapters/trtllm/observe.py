"""From flashinfer tap records to trace steps, as far as the tap lets specseed attribute them.

TensorRT-LLM passes flashinfer no request ids: a tapped call shows, per kernel row, the seed
and offset the engine put there and the token that came out. What can be tied to a request and
an iteration, and under which conditions, is stated here and nowhere else:

- Strict verification (``use_rejection_sampling`` off): the one-model path samples every
  non-greedy forward pass in ONE call over all logits rows (a context request 1 row, a
  generation request K + 1 rows, one per target position), with the request's seed at each of
  its rows; drafts are argmax (no call). So each call is one engine step, a request's rows in
  it are its target rows 0..K in order, and its decoding iteration is the number of earlier
  calls it appeared in (a sampled request is never in an all-greedy batch, which would take
  the argmax path and make no call).
- A row belongs to a request when the seed passed at that row (``seed_given``, not the one
  the kernel used: flashinfer 0.6.4 reads element 0 only) is the TensorRT-LLM seed of exactly
  one request of the phase (its ``SamplingParams.seed``, or 42 when unset). Rows of unseeded
  requests, or of requests sharing a seed, cannot be attributed: runs with such sampled
  requests declare steps unobserved instead of guessing.
- Rejection sampling mixes ``chain_speculative_sampling`` calls (one row per request) with
  draft-step calls and context-sampling calls of one row per request that the tap cannot tell
  apart: steps are unobserved there. Calls captured into a CUDA graph record no rows at all.

What is never observed: drafts, accepted counts, which tokens were emitted, logits, slots.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict

from specseed.core.contracts import DEFAULT_SAMPLING_SEED, UINT64_MASK
from specseed.engine_adapters.base import EngineSettings, RequestPlan
from specseed.taps.flashinfer_tap import TapCall, TapColumns
from specseed.traces.records import Observability, Phase, RowRecord, SamplingEvent, StepRecord

STRICT_PATH_FUNCTIONS = frozenset(
    {
        "sampling_from_probs",
        "sampling_from_logits",
        "top_k_sampling_from_probs",
        "top_p_sampling_from_probs",
        "top_k_top_p_sampling_from_probs",
        "top_k_top_p_sampling_from_logits",
        "min_p_sampling_from_probs",
    }
)
"""Tapped functions the strict path may call for target rows (never the rejection kernel)."""

NOTES_STRICT = (
    "RNG state from a tap on flashinfer.sampling (CUDA graphs off); strict verification: one "
    "sampling call per engine step, rows tied to requests by the seed passed at each row; "
    "drafts, acceptance, emitted tokens, logits and slots are not observed"
)


class UnattributableCalls(ValueError):
    """Tap records that cannot be turned into steps without guessing (the message says why)."""


def engine_seed(request: RequestPlan) -> int:
    """The seed TensorRT-LLM gives a request: its own (uint64 bits), or 42."""
    return DEFAULT_SAMPLING_SEED if request.seed is None else request.seed & UINT64_MASK


def unattributable(requests: Sequence[RequestPlan]) -> list[str]:
    """Sampled requests whose rows a tap cannot tie to them (their seed is not theirs alone)."""
    counts = Counter(engine_seed(r) for r in requests)
    return [r.request_id for r in requests if not r.greedy and counts[engine_seed(r)] > 1]


def tap_observability(
    settings: EngineSettings,
    cuda_graphs: bool,
    phases: Iterable[Sequence[RequestPlan]],
    *,
    tree: bool = False,
) -> Observability:
    """What a TensorRT-LLM run with these settings and traffic lets the tap show.

    ``tree``: EAGLE3 tree drafting. Its target rows (``max_total_draft_tokens + 1`` per
    generation request, one slot each in the slot-span layouts) are tapped like a chain's,
    but the checks predict offsets from ``max_draft_len`` alone, so rows are left untied
    (skipped with the reason) rather than compared against a chain's layout.
    """
    if cuda_graphs:
        return Observability(
            steps=False,
            rng_state=None,
            drafts=False,
            logits=False,
            notes="CUDA graphs on: replays bypass the flashinfer tap, no RNG state is seen",
        )
    if settings.max_draft_len == 0:
        return Observability(
            steps=False,
            rng_state=None,
            drafts=False,
            logits=False,
            notes="max_draft_len 0: TensorRT-LLM samples outside the one-model speculative "
            "path the tap is built for; RNG state not observed",
        )
    if tree:
        return Observability(
            steps=False,
            rng_state="philox",
            drafts=False,
            logits=False,
            notes="tree drafting: the tap sees per-row seeds and offsets, but the checks "
            "predict offsets for linear drafting, so rows are not tied to requests and "
            "iterations (contracts.expected takes max_total_draft_tokens)",
        )
    if settings.verification == "rejection":
        return Observability(
            steps=False,
            rng_state="philox",
            drafts=False,
            logits=False,
            notes="rejection sampling: the tap sees per-row seeds and offsets, but draft-step "
            "and context-sampling calls (one row per request each) cannot be told apart, so "
            "rows are not tied to requests and iterations",
        )
    blind = [rid for phase in phases for rid in unattributable(phase)]
    if blind:
        return Observability(
            steps=False,
            rng_state="philox",
            drafts=False,
            logits=False,
            notes="sampled requests without a seed of their own ("
            + ", ".join(blind[:6])
            + (", ..." if len(blind) > 6 else "")
            + "): their rows cannot be tied to them, so steps are not observed",
        )
    return Observability(
        steps=True, rng_state="philox", drafts=False, logits=False, notes=NOTES_STRICT
    )


def steps_from_tap(
    calls: Sequence[TapCall],
    requests: Sequence[RequestPlan],
    phase: Phase,
    first_step: int = 0,
) -> list[StepRecord]:
    """One ``StepRecord`` per tapped strict-path call of one phase (see the module notes).

    Raises ``UnattributableCalls`` for records this conversion cannot read honestly: a call
    captured into a CUDA graph, the rejection kernel, a torch-generator call (no Philox
    state), or a row whose seed names no request of the phase.
    """
    by_seed: dict[int, str] = {}
    counts = Counter(engine_seed(r) for r in requests)
    for request in requests:
        if counts[engine_seed(request)] == 1:
            by_seed[engine_seed(request)] = request.request_id
    iterations: dict[str, int] = defaultdict(int)
    steps = []
    for number, call in enumerate(calls):
        if call.captured or call.columns is None:
            raise UnattributableCalls(
                f"tap call {call.index} ({call.function}) ran inside a CUDA graph capture: "
                "its rows are not recorded"
            )
        if call.function not in STRICT_PATH_FUNCTIONS:
            raise UnattributableCalls(
                f"tap call {call.index} is {call.function}, which the strict one-model path "
                "never calls: rows cannot be tied to iterations"
            )
        if call.seed_kind == "generator":
            raise UnattributableCalls(
                f"tap call {call.index} ({call.function}) drew from a torch generator: no "
                "per-row Philox state"
            )
        groups: dict[str, list[SamplingEvent]] = {}
        for row in call.rows:
            assert row.seed_given is not None and row.seed is not None and row.offset is not None
            owner = by_seed.get(row.seed_given)
            if owner is None:
                if row.seed_given in counts:
                    continue  # a row of a request that shares its seed: not attributable
                raise UnattributableCalls(
                    f"tap call {call.index} row {row.row} carries seed {row.seed_given}, "
                    f"which no {phase} request has"
                )
            own = groups.setdefault(owner, [])
            own.append(
                SamplingEvent(
                    kind="target",
                    index=len(own),
                    kernel=call.function,
                    kernel_row=row.row,
                    seed=row.seed,
                    subsequence=row.subsequence,
                    offset=row.offset,
                    draws=row.draws or 0,  # top-k/top-p draws are data-dependent: unknown
                )
            )
        rows = []
        for position, (request_id, events) in enumerate(groups.items()):
            rows.append(
                RowRecord(
                    request_id=request_id,
                    row=position,
                    slot=-1,
                    phase=phase,
                    decoding_iter=iterations[request_id],
                    drafts_verified=(),
                    accepted=0,
                    emitted=(),
                    first_position=0,
                    logits_fingerprints=(),
                    drafts_proposed=(),
                    events=tuple(events),
                )
            )
            iterations[request_id] += 1
        steps.append(StepRecord(step=first_step + number, phase=phase, rows=tuple(rows)))
    return steps


# -- recorded tap data (JSON) ------------------------------------------------------------


def calls_to_json(calls: Sequence[TapCall]) -> list[dict[str, object]]:
    """Tap calls as plain JSON data (what a recording stores)."""
    out = []
    for call in calls:
        data = asdict(call)
        if call.columns is not None:
            data["columns"]["tokens"] = [list(t) for t in call.columns.tokens]
        out.append(data)
    return out


def calls_from_json(data: Sequence[dict[str, object]]) -> list[TapCall]:
    """Tap calls back from ``calls_to_json`` data."""
    calls = []
    for item in data:
        fields = dict(item)
        columns = fields.pop("columns")
        if isinstance(columns, dict):
            columns = TapColumns(**{**columns, "tokens": [tuple(t) for t in columns["tokens"]]})
        calls.append(TapCall(**fields, columns=columns))  # type: ignore[arg-type]
    return calls
