"""Seeds that collide, seen in tokens alone: evidence where the RNG is hidden.

Requests of one run with the same prompt and sampling setup draw independent streams when
their seeds differ (or when they have none and the engine gives each its own). Two that
return the same sampled stream either met by chance or share random numbers; a server over
HTTP shows no RNG state, so the tokens are all there is, and this check bounds the chance.

Per pair with identical outputs, the probability that independent streams agree:

- from the target's own probabilities where they are known: given one stream ``s``, the other
  reproduces it with probability ``P(s) = prod_t p(s_t | s_<t)`` (the probability oracle, the
  target recomputed teacher-forced at the requests' temperature, top-k and top-p, each token's
  probability widened by the logits dtype's envelope; or the engine's own log-probabilities
  where its trace carries them). Pairs are tested at alpha / (pairs of the group), Bonferroni;
- without them, from control pairs: the group's pairs that no plausible defect joins (seeds
  differing in their low 32 bits) against the pairs under test (seeds equal in their low 32
  bits, or both unseeded). Under independence all pairs are alike, so the chance that the
  identical ones are the tested ones is hypergeometric: exact, and below alpha only with
  enough pairs (the built-in ``distinct-seeds`` scenario has 4 tested and 24 control pairs:
  4 of 4 identical and 0 of 24 gives 4.9e-5).

What a collision points at: seeds equal in their low 32 bits (``seed-high-bits-dropped``,
alone when some control pair of the group differs: an engine ignoring every seed would have
joined those too), two unseeded requests (``unseeded-shared-stream`` and the defects that
hand one stream to a call), different seeds (``engine-counter``, ``row0-seed``; and
``children-shared-stream`` where both are of one request's ``n``). Streams
shorter than ``MIN_TOKENS`` are not compared.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterator, Sequence
from itertools import combinations
from typing import Any

from specseed.checks.context import CheckContext
from specseed.checks.findings import Finding, Suspect
from specseed.checks.registry import run_check
from specseed.checks.suspects import merge
from specseed.core.seeds import fmt_seed
from specseed.core.wording import plural
from specseed.traces.records import FILTER_KNOBS, PENALTY_KNOBS, RequestInfo, RunTrace

CHECK_ID = "seed-collisions"
ALPHA = 1e-3
"""Significance per group of requests (Bonferroni over its pairs with probabilities)."""
MIN_TOKENS = 8
"""Shorter identical streams are not compared (peaked distributions repeat short outputs)."""
DETAILED_PAIRS = 20
"""Pairs described one line each; the rest are counted (every request is still named)."""
LOW_32 = (1 << 32) - 1
MASK_64 = (1 << 64) - 1
UNIT_ROUNDOFF_DEFAULT = "bfloat16"


def _setup_key(info: RequestInfo) -> tuple[object, ...]:
    knobs = {k: v for k, v in info.knobs().items() if k not in ("logprobs", "n")}
    return (
        tuple(info.prompt_ids),
        info.temperature,
        info.top_k,
        info.top_p,
        info.max_tokens,
        tuple(sorted((k, str(v)) for k, v in knobs.items())),
    )


RESHAPING_KNOBS = (*PENALTY_KNOBS, *FILTER_KNOBS)
"""Knobs that change the sampled distribution beyond temperature, top-k and top-p: the
oracle's probabilities leave them out, so they bound nothing for such a request."""


def _tested(a: RequestInfo, b: RequestInfo) -> bool:
    """A pair under test: one no correct engine joins, but a seed kept in 32 bits or a
    shared unseeded stream would (the rest are controls)."""
    if a.seed is None and b.seed is None:
        return True
    if a.seed is None or b.seed is None:
        return False
    return (a.seed & LOW_32) == (b.seed & LOW_32) and (a.seed & MASK_64) != (b.seed & MASK_64)


def _family(info: RequestInfo) -> str | None:
    """The request whose ``n`` made ``info`` (itself for a parent), None outside any ``n``."""
    if info.parent is not None:
        return info.parent
    return info.request_id if (info.n or 1) > 1 else None


def _suspects(
    a: RequestInfo, b: RequestInfo, controls_differ: bool, unseeded: bool
) -> list[Suspect]:
    pair = f"{a.request_id} and {b.request_id}"
    if a.seed is None and b.seed is None:
        why = f"unseeded {pair} returned the same stream"
        found = [
            Suspect("unseeded-shared-stream", f"{why}: one stream for unseeded requests"),
            Suspect("neighbor-unseeded", f"{why}: one stream for the call"),
            Suspect("engine-counter", f"{why}: one engine-wide seed for the call"),
            Suspect("row0-seed", f"{why}: every row drew row 0's seed"),
        ]
        return found
    if a.seed is not None and b.seed is not None and _tested(a, b):
        why = (
            f"{pair} (seeds {fmt_seed(a.seed)} and {fmt_seed(b.seed)}, equal in their low 32 "
            "bits) returned the same stream"
        )
        found = [Suspect("seed-high-bits-dropped", f"{why}: the seed keeps 32 bits")]
        if controls_differ:  # seeds differing low kept their streams: no seed is ignored
            return found
        return [
            *found,
            Suspect("engine-counter", f"{why}: no seed decides the stream"),
            Suspect("row0-seed", f"{why}: both drew row 0's seed"),
        ]
    why = f"{pair} (different seeds) returned the same stream"
    found = []
    family = _family(a)
    if family is not None and family == _family(b):
        found.append(
            Suspect("children-shared-stream", f"{why}: both are of {family}'s n, one stream")
        )
    found += [
        Suspect("engine-counter", f"{why}: no seed decides the stream"),
        Suspect("row0-seed", f"{why}: both drew row 0's seed"),
    ]
    if unseeded:
        found.append(Suspect("neighbor-unseeded", f"{why}: the seeds were dropped for the call's"))
    return found


def _stream_probability(
    trace: RunTrace, info: RequestInfo, tokens: Sequence[int]
) -> tuple[float, str] | None:
    """An upper bound on the probability that an independent stream reproduces ``tokens``,
    and where it came from; None without probabilities."""
    recorded: Any = getattr(trace.end, "logprobs", None) or {}
    entries = recorded.get(info.request_id) if isinstance(recorded, dict) else None
    if entries and len(entries) == len(tokens):
        return math.exp(
            min(0.0, sum(float(e.logprob) for e in entries))
        ), "engine log-probabilities"
    if any(k in RESHAPING_KNOBS for k in info.knobs()):
        # Found by specseed search on the correct engine: repetition_penalty 0.5 makes a
        # top_p 0.25 stream repeat itself, which the oracle's 5e-301 called impossible.
        return None
    try:  # torch and the model, only for identical streams
        import torch

        from specseed.distribution.evidence import UNIT_ROUNDOFF, SamplingSetup
        from specseed.distribution.oracle import OracleUnavailable, distributions, oracle_for
    except ImportError:
        return None
    try:
        oracle = oracle_for(trace.header.engine_config)
        [logits] = oracle.logits([(tuple(info.prompt_ids), tuple(tokens))])
    except (OracleUnavailable, ValueError, RuntimeError):
        return None
    setup = SamplingSetup(info.temperature, info.top_k, info.top_p)
    probs = distributions(logits, setup)
    chosen = probs[torch.arange(len(tokens)), torch.tensor(tokens)]
    # The engine's logits may differ from the oracle's by the dtype's rounding: each token's
    # probability can be larger by exp(2 u max|logit| / T) (the distribution envelope).
    dtype = trace.header.environment.get("logits_dtype") or UNIT_ROUNDOFF_DEFAULT
    unit = UNIT_ROUNDOFF.get(dtype, UNIT_ROUNDOFF[UNIT_ROUNDOFF_DEFAULT])
    unit += float(getattr(oracle, "logits_error", 0.0))
    widen = 2.0 * unit * logits.abs().amax(dim=-1) / info.temperature
    log_p = float((torch.log(chosen.clamp(min=1e-300)) + widen).clamp(max=0.0).sum())
    return math.exp(log_p), "the target's probabilities"


def _hypergeometric_tail(total: int, marked: int, drawn: int, at_least: int) -> float:
    """P(X >= at_least) for X ~ Hypergeometric(total, marked, drawn)."""
    denominator = math.comb(total, drawn)
    return (
        sum(
            math.comb(marked, k) * math.comb(total - marked, drawn - k)
            for k in range(at_least, min(marked, drawn) + 1)
        )
        / denominator
    )


def _same_seed(a: RequestInfo, b: RequestInfo) -> bool:
    return a.seed is not None and b.seed is not None and (a.seed - b.seed) & MASK_64 == 0


def _any_same(members: Sequence[RequestInfo], outputs: dict[str, tuple[int, ...]]) -> bool:
    """Whether some compared pair (a before b, a's stream of at least :data:`MIN_TOKENS`,
    seeds not equal) returned one stream: linear in the members (a run of 150 copies has
    11,175 pairs, nearly always none alike)."""
    by_stream: dict[tuple[int, ...], list[RequestInfo]] = defaultdict(list)
    for m in members:
        if len(outputs[m.request_id]) >= MIN_TOKENS:
            by_stream[outputs[m.request_id]].append(m)
    return any(
        not _same_seed(a, b)
        for alike in by_stream.values()
        if len(alike) > 1
        for a, b in combinations(alike, 2)
    )


def _count_pairs(members: Sequence[RequestInfo], outputs: dict[str, tuple[int, ...]]) -> int:
    """The compared pairs (as :func:`seed_collisions` lists them) of ``members``, counted
    without listing them: for each a, the members after it whose seed differs from a's."""
    count = 0
    later_seeds: dict[int, int] = defaultdict(int)
    for index in range(len(members) - 1, -1, -1):
        a = members[index]
        later = len(members) - 1 - index
        if len(outputs[a.request_id]) >= MIN_TOKENS:
            count += later - (later_seeds[a.seed & MASK_64] if a.seed is not None else 0)
        if a.seed is not None:
            later_seeds[a.seed & MASK_64] += 1
    return count


@run_check(
    CHECK_ID,
    short="collide",
    title="No seed collisions in tokens",
    description="Requests of one run with the same prompt and setup and different seeds (or "
    "none) do not return the same sampled stream beyond what chance allows (bounded from the "
    "target's probabilities, or from control pairs).",
    targets=("seed-high-bits-dropped", "unseeded-shared-stream"),
    needs=("tokens",),
)
def seed_collisions(ctx: CheckContext, trace: RunTrace) -> Iterator[Finding]:
    if trace.failed:
        return
    groups: dict[tuple[object, ...], list[RequestInfo]] = defaultdict(list)
    for info in trace.header.requests:
        if (
            info.phase == "scenario"
            and info.temperature > 0
            and info.request_id in trace.end.outputs
        ):
            groups[_setup_key(info)].append(info)
    unseeded = any(info.seed is None for members in groups.values() for info in members)
    compared = 0
    problems: list[str] = []
    suspects: list[Suspect] = []
    groups_found: list[tuple[str, ...]] = []
    requests: list[str] = []
    unbounded: list[str] = []
    for members in groups.values():
        outputs = {m.request_id: tuple(trace.end.outputs[m.request_id]) for m in members}
        if not _any_same(members, outputs):
            compared += _count_pairs(members, outputs)
            continue
        pairs = [
            (a, b)
            for a, b in combinations(members, 2)
            if not _same_seed(a, b) and len(outputs[a.request_id]) >= MIN_TOKENS
        ]
        if not pairs:
            continue
        compared += len(pairs)
        same = [(a, b) for a, b in pairs if outputs[a.request_id] == outputs[b.request_id]]
        if not same:
            continue
        controls = [(a, b) for a, b in pairs if not _tested(a, b)]
        controls_differ = any(outputs[a.request_id] != outputs[b.request_id] for a, b in controls)
        # The chance bound: probabilities per pair where the target's are known.
        significant: list[tuple[RequestInfo, RequestInfo, str]] = []
        bound_all = True
        bounds: dict[tuple[int, ...], tuple[float, str] | None] = {}  # one forward per stream
        for a, b in same:
            stream = outputs[a.request_id]
            if stream not in bounds:
                bounds[stream] = _stream_probability(trace, a, stream)
            bound = bounds[stream]
            if bound is None:
                bound_all = False
                break
            p, source = bound
            if p <= ALPHA / len(pairs):
                significant.append((a, b, f"chance {p:.2g} ({source}, {len(pairs)} pairs)"))
        if not bound_all:
            # Without probabilities: the identical pairs against the controls.
            tested = [pair for pair in pairs if _tested(*pair)]
            hits = [pair for pair in same if _tested(*pair)]
            if not tested or not controls:
                unbounded.append(", ".join(f"{a.request_id}={b.request_id}" for a, b in same))
                continue
            p = _hypergeometric_tail(len(pairs), len(same), len(tested), len(hits))
            if hits and p <= ALPHA:
                source = (
                    f"chance {p:.2g}: {len(hits)} of {len(tested)} tested pairs identical "
                    f"against {len(same) - len(hits)} of {len(controls)} control pairs"
                )
                significant = [(a, b, source) for a, b in hits]
        for a, b, source in significant:
            found = _suspects(a, b, controls_differ, unseeded)
            suspects.extend(found)
            groups_found.append(tuple(dict.fromkeys(s.defect for s in found)))
            requests += [a.request_id, b.request_id]
            problems.append(
                f"{a.request_id} and {b.request_id} returned the same "
                f"{plural(len(outputs[a.request_id]), 'token')}: {source}"
            )
    if problems:
        shown = problems[:DETAILED_PAIRS]
        if len(problems) > DETAILED_PAIRS:
            shown.append(f"... and {len(problems) - DETAILED_PAIRS} more pairs")
        yield Finding(
            status="fail",
            message=f"{trace.name}: {plural(len(problems), 'pair')} of requests with the same "
            f"prompt returned one stream, beyond chance at alpha {ALPHA:g}",
            runs=(trace.name,),
            requests=tuple(dict.fromkeys(requests)),
            suspects=merge(suspects),
            details=tuple(shown),
            suspect_groups=tuple(dict.fromkeys(groups_found)),
        )
    elif unbounded:
        yield Finding(
            status="skip",
            message=f"{trace.name}: identical streams ({'; '.join(unbounded)}) and nothing to "
            "bound chance with: no target probabilities (no model here, no log-probabilities "
            "from the engine) and no control pairs",
            runs=(trace.name,),
        )
    elif compared:
        yield Finding(
            status="pass",
            message=f"{trace.name}: {plural(compared, 'pair')} of same-prompt requests, no "
            "collision beyond chance",
            runs=(trace.name,),
        )
