"""Hypothesis strategies that draw scenarios for ``specseed search``.

A drawn case is a scenario (its dict form, validated by ``scenarios.schema.Scenario``): a
batch of requests served in a ``base`` run, and the runs that make its invariants testable,
each named under ``expect`` with the comparison check that judges it:

========== =================================================== =========================
run        how it differs from ``base``                        expectation
========== =================================================== =========================
again      nothing: the same traffic twice                     run-to-run
alone      one seeded or greedy request, alone                 batch-invariance
permuted   the same requests in another order (other rows)     position-invariance
uptime     warmup batches (above max_num_requests too) and     uptime-invariance
           prior traffic first
overlap    the overlap scheduler switched                      overlap-invariance
k0         max_draft_len 0 (the K = 0 baseline)                greedy-spec-equivalence
========== =================================================== =========================

Every run is also judged by every run check (the RNG layout against the contract, disjoint
draws, distinct seeds, unseeded independence, runs complete). One case in
:data:`STATISTICAL_ODDS` is statistical instead: seeded sampled requests copied for the
``distribution`` check, with a K = 0 baseline for ``losslessness``.

Requests are drawn field by field from :data:`REQUEST_FIELDS`, one entry per field of the
scenario model's ``RequestSpec``: a field added to the model is covered by adding its entry
(until then it is drawn from its type and bounds by :func:`generic_field`, or left unset
where those say too little). The fields of :data:`CORE_FIELDS` (prompt, seed, temperature,
top-k, top-p, max_tokens) are drawn for every request; of the others, the sampling knobs
(min_p, logit_bias, the penalties, stop, stop_token_ids, ignore_eos, logprobs, n), each
request sets at most :data:`MAX_KNOBS`, chosen among those the engine takes
(``TrafficBounds.knobs``): a bounded draw that still reaches every knob and every pair of
them, and that shrinks by dropping a knob. Hypothesis shrinks toward the first branch of
each choice, so the branches are ordered simplest first: fewer requests, short prompts,
small seeds, the field unset, no knob, no extra run.
"""

from __future__ import annotations

import copy
import functools
import types
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import annotated_types
from hypothesis import assume
from hypothesis import strategies as st
from pydantic import ValidationError
from pydantic.fields import FieldInfo

from specseed.scenarios.schema import (
    COMPARISON_CHECK_IDS,
    INT64_MIN,
    UINT64_MAX,
    RequestSpec,
)

UNSET: Any = object()
"""A field left out of the request (the scenario's default, or the engine's)."""

RequestKind = Literal["seeded", "greedy", "unseeded"]
KINDS: tuple[RequestKind, ...] = ("seeded", "greedy", "unseeded")

EDGE_SEEDS: tuple[int, ...] = (
    0,
    2**31 - 1,
    2**31,
    2**32 - 1,
    2**32,
    2**32 + 1,
    2**63 - 1,
    2**63,
    INT64_MIN,
    -1,
    UINT64_MAX,
)
"""Seeds where a 32-bit or signed buffer, a hash or a conversion goes wrong."""

STATISTICAL_ODDS = 10
"""One drawn case in this many is a statistical one (``distribution`` and ``losslessness``)."""
DISTRIBUTION_SAMPLES = 150
"""Copies of each request of a statistical case (the library's cases use 150 to 300)."""
DEFAULT_VOCAB = 256
"""Prompt ids are drawn below this where the engine does not say its vocabulary."""
DEFAULT_CONTEXT = 128
"""Tokens per request where the engine does not say its context length."""
PRIOR_PROMPT_TOKENS = 32
"""Room a prior-traffic request's prompt ("earlier traffic, request N") takes."""

VARIANT_CHECKS: Mapping[str, tuple[str, ...]] = {
    "again": ("run-to-run",),
    "alone": ("batch-invariance",),
    "permuted": ("position-invariance",),
    "uptime": ("uptime-invariance",),
    "overlap": ("overlap-invariance",),
    "k0": ("greedy-spec-equivalence", "knob-equivalence"),
    "baseline": ("losslessness",),
}
"""The comparison checks each run beside ``base`` makes testable (a check not registered in
this installation is left out)."""

K0_FIRST = frozenset({"knob-equivalence"})
"""Comparisons that name the K = 0 run first (``knob-equivalence`` holds the speculative run
to it); the others name ``base`` first."""

CORE_FIELDS: tuple[str, ...] = ("prompt", "seed", "temperature", "top_k", "top_p", "max_tokens")
"""The request fields drawn for every request; every other field is a knob (at most
:data:`MAX_KNOBS` of them per request)."""
MAX_KNOBS = 2
"""Most knobs one request sets: every knob and every pair of them is reached, and a case
stays readable (and cheap to shrink) where ten knobs per request would not."""


@dataclass(frozen=True)
class TrafficBounds:
    """What the search may send: the engine's limits and the search's own caps."""

    vocab_size: int = DEFAULT_VOCAB
    context_length: int = DEFAULT_CONTEXT
    max_num_requests: int = 8
    """model.yaml's: a run's own is drawn at most this large."""
    max_draft_len: int = 3
    """model.yaml's K."""
    fixed_settings: bool = False
    """True: no run changes an engine setting (a server over HTTP)."""
    max_requests: int = 5
    """Most requests in a case's base run."""
    max_tokens: int = 12
    """Most tokens a request asks for."""
    max_draft: int = 4
    """Largest K a run draws."""
    statistical: bool = True
    """Draw statistical cases (``distribution``, ``losslessness``)."""
    comparisons: tuple[str, ...] = COMPARISON_CHECK_IDS
    """Comparison checks this installation registers."""
    knobs: tuple[str, ...] | None = None
    """The knobs a request may set (None: every knob field of the model); an engine that
    refuses a knob outright (``TrafficLimits.refused_knobs``) is not sent it."""
    kinds: tuple[RequestKind, ...] = KINDS
    """The request kinds drawn (``--kinds``: greedy alone searches past a known bug in an
    engine's sampled path)."""

    @property
    def longest_prompt(self) -> int:
        """The longest prompt that leaves room for the output and the drafts in flight."""
        drafts = max(self.max_draft, self.max_draft_len)
        return max(1, self.context_length - self.max_tokens - drafts - 2)


# -- request fields -------------------------------------------------------------------------

FieldStrategy = Callable[[TrafficBounds, RequestKind], st.SearchStrategy[Any]]
"""A field's strategy for a request of a kind; it draws a value or :data:`UNSET` (a knob's
draws a value: whether it is set at all is chosen before)."""


def optional(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """The field unset (what it shrinks to), or a value of ``strategy``."""
    return st.one_of(st.just(UNSET), strategy)


def _rounded(low: float, high: float, digits: int = 2) -> st.SearchStrategy[float]:
    return st.floats(low, high).map(lambda x: min(high, max(low, round(x, digits))))


def _prompt(bounds: TrafficBounds, kind: RequestKind) -> st.SearchStrategy[Any]:
    ids = st.integers(0, bounds.vocab_size - 1)
    longest = bounds.longest_prompt
    branches: list[st.SearchStrategy[Any]] = [st.lists(ids, min_size=1, max_size=min(8, longest))]
    if longest > 8:
        branches.append(st.lists(ids, min_size=9, max_size=min(64, longest)))
    if longest > 64:
        # A long prompt repeats a short drawn pattern: a few choices to draw and to shrink
        # (its length shrinks toward 65), where 200 drawn ids made every draw slow.
        pattern = st.lists(ids, min_size=1, max_size=8)
        long = st.tuples(pattern, st.integers(65, longest))
        branches.append(long.map(lambda p: [p[0][i % len(p[0])] for i in range(p[1])]))
    text = st.text(st.sampled_from("abcdefghij klmnopqrstuvwxyz"), min_size=1, max_size=24)
    branches.append(text.filter(lambda t: len(t.encode()) <= longest))
    return st.one_of(*branches)


def _seed(bounds: TrafficBounds, kind: RequestKind) -> st.SearchStrategy[Any]:
    if kind != "seeded":
        return st.just(UNSET)
    return st.one_of(
        st.integers(0, 1000), st.sampled_from(EDGE_SEEDS), st.integers(INT64_MIN, UINT64_MAX)
    )


def _temperature(bounds: TrafficBounds, kind: RequestKind) -> st.SearchStrategy[Any]:
    if kind == "greedy":
        return st.just(0.0)
    return optional(st.one_of(st.sampled_from((0.5, 0.8, 1.3)), _rounded(0.05, 2.0)))


def _top_k(bounds: TrafficBounds, kind: RequestKind) -> st.SearchStrategy[Any]:
    return optional(st.one_of(st.integers(1, 64), st.sampled_from((1, bounds.vocab_size - 1))))


def _top_p(bounds: TrafficBounds, kind: RequestKind) -> st.SearchStrategy[Any]:
    return optional(_rounded(0.05, 0.99))


def _max_tokens(bounds: TrafficBounds, kind: RequestKind) -> st.SearchStrategy[Any]:
    return st.integers(1, bounds.max_tokens)


def _token_ids(bounds: TrafficBounds, kind: RequestKind) -> st.SearchStrategy[Any]:
    return st.lists(st.integers(0, bounds.vocab_size - 1), min_size=1, max_size=3)


REQUEST_FIELDS: dict[str, FieldStrategy] = {
    "prompt": _prompt,
    "seed": _seed,
    "temperature": _temperature,
    "top_k": _top_k,
    "top_p": _top_p,
    "max_tokens": _max_tokens,
    # The sampling knobs (OpenAI / vLLM names): a value each, edges first.
    "min_p": lambda b, k: st.one_of(st.sampled_from((0.1, 1.0)), _rounded(0.0, 0.5)),
    "presence_penalty": lambda b, k: st.one_of(st.sampled_from((2.0, -2.0)), _rounded(-2.0, 2.0)),
    "frequency_penalty": lambda b, k: st.one_of(st.sampled_from((2.0, -2.0)), _rounded(-2.0, 2.0)),
    "repetition_penalty": lambda b, k: st.one_of(st.just(2.0), _rounded(0.5, 2.0)),
    "stop_token_ids": _token_ids,
    "stop": lambda b, k: st.text(st.sampled_from("abcde "), min_size=1, max_size=3),
    "ignore_eos": lambda b, k: st.booleans(),
    "logprobs": lambda b, k: st.integers(0, 5),
    "n": lambda b, k: st.integers(1, 3),
    "logit_bias": lambda b, k: st.dictionaries(
        st.integers(0, b.vocab_size - 1),
        st.one_of(st.sampled_from((-100.0, 100.0)), _rounded(-100.0, 100.0, 1)),
        min_size=1,
        max_size=3,
    ),
}
"""One strategy per request field (entries for fields the model lacks are not used)."""

NOT_COPIED = frozenset({"n"})
"""Fields a request copied for the ``distribution`` check must leave unset."""


def _bounds_of(metadata: Sequence[Any]) -> tuple[Any, Any, bool, bool]:
    """(low, high, low excluded, high excluded) from a field's annotated-types bounds."""
    low: Any = None
    high: Any = None
    open_low = open_high = False
    for item in metadata:
        if isinstance(item, FieldInfo):  # Annotated[int, Field(ge=0)]
            return _bounds_of(item.metadata)
        if isinstance(item, annotated_types.Ge):
            low = item.ge
        elif isinstance(item, annotated_types.Gt):
            low, open_low = item.gt, True
        elif isinstance(item, annotated_types.Le):
            high = item.le
        elif isinstance(item, annotated_types.Lt):
            high, open_high = item.lt, True
    return low, high, open_low, open_high


def _from_type(annotation: Any, metadata: Sequence[Any]) -> st.SearchStrategy[Any] | None:
    """A small strategy for a field's type, within its bounds; None when the type says too
    little (the field then stays unset)."""
    origin = get_origin(annotation)
    if origin is Annotated:
        inner, *extra = get_args(annotation)
        return _from_type(inner, [*metadata, *extra])
    if origin in (Union, types.UnionType):
        parts = [a for a in get_args(annotation) if a is not type(None)]
        found = [s for s in (_from_type(a, metadata) for a in parts) if s is not None]
        return st.one_of(*found) if found else None
    if origin is Literal:
        return st.sampled_from(get_args(annotation))
    low, high, open_low, open_high = _bounds_of(metadata)
    if annotation is bool:
        return st.booleans()
    if annotation is int:
        first = int(low) + (1 if open_low else 0) if low is not None else 0
        last = int(high) - (1 if open_high else 0) if high is not None else first + 16
        return st.integers(first, min(last, first + 16))
    if annotation is float:
        bottom = float(low) if low is not None else 0.0
        top = min(float(high) if high is not None else bottom + 2.0, bottom + 4.0)
        return st.floats(bottom, top, exclude_min=open_low, exclude_max=open_high)
    if origin is list:
        args = get_args(annotation)
        inner = _from_type(args[0], ()) if args else None
        return None if inner is None else st.lists(inner, min_size=1, max_size=3)
    return None


def generic_field(name: str, info: FieldInfo) -> FieldStrategy | None:
    """The strategy of a request field with no entry in :data:`REQUEST_FIELDS`: its type
    within its bounds (small values), or None when its type says too little. Such a field
    is a knob: at most :data:`MAX_KNOBS` per request are set."""
    strategy = _from_type(info.annotation, info.metadata)
    if strategy is None:
        return None
    return lambda bounds, kind: strategy


def field_strategies() -> dict[str, FieldStrategy | None]:
    """Every field of ``RequestSpec`` with the strategy it is drawn from (None: left unset,
    reported as unexplored)."""
    return {
        name: REQUEST_FIELDS.get(name) or generic_field(name, info)
        for name, info in RequestSpec.model_fields.items()
    }


@functools.lru_cache(maxsize=64)
def _field_draws(
    bounds: TrafficBounds, kind: RequestKind, copied: bool
) -> tuple[tuple[tuple[str, st.SearchStrategy[Any]], ...], dict[str, st.SearchStrategy[Any]]]:
    """Each field's strategy for a request of ``kind``, built once per bounds: the core
    fields in order, and the knobs the request may choose among."""
    drawn = [
        (name, strategy(bounds, kind))
        for name, strategy in field_strategies().items()
        if strategy is not None and not (copied and name in NOT_COPIED)
    ]
    allowed = bounds.knobs
    core = tuple((name, s) for name, s in drawn if name in CORE_FIELDS)
    knobs = {
        name: s
        for name, s in drawn
        if name not in CORE_FIELDS and (allowed is None or name in allowed)
    }
    return core, knobs


@functools.lru_cache(maxsize=64)
def requests(
    bounds: TrafficBounds, kind: RequestKind, *, copied: bool = False
) -> st.SearchStrategy[dict[str, Any]]:
    """One request of ``kind``: every core field drawn from its strategy, and at most
    :data:`MAX_KNOBS` knobs (``copied``: for the ``distribution`` check, without the
    fields copies refuse)."""
    core, knobs = _field_draws(bounds, kind, copied)
    chosen = st.lists(st.sampled_from(sorted(knobs)), max_size=MAX_KNOBS, unique=True)

    @st.composite
    def request(draw: st.DrawFn) -> dict[str, Any]:
        drawn: dict[str, Any] = {}
        for name, strategy in core:
            value = draw(strategy)
            if value is not UNSET:
                drawn[name] = value
        for name in draw(chosen) if knobs else ():
            value = draw(knobs[name])
            if value is not UNSET:
                drawn[name] = value
        if kind == "unseeded":
            drawn["seed"] = None
        try:
            RequestSpec.model_validate(drawn)
        except ValidationError:
            assume(False)  # a combination the model refuses (a rule across fields)
        return drawn

    return request()


# -- cases ----------------------------------------------------------------------------------


def _twin_seeds(draw: st.DrawFn, requests: list[dict[str, Any]]) -> None:
    """Maybe make one seeded request's seed differ from another's in its high 32 bits only."""
    seeded = [i for i, r in enumerate(requests) if r.get("seed") is not None]
    if len(seeded) < 2 or not draw(st.booleans()):
        return
    first = draw(st.sampled_from(seeded))
    second = draw(st.sampled_from([i for i in seeded if i != first]))
    high = draw(st.integers(1, (1 << 32) - 1))
    low = requests[first]["seed"] & ((1 << 32) - 1)
    requests[second]["seed"] = (((requests[first]["seed"] >> 32) ^ high) << 32 | low) & UINT64_MAX


def _engine(draw: st.DrawFn, bounds: TrafficBounds, *, draft: bool = True) -> dict[str, Any]:
    """A run's engine overrides (none where settings are fixed)."""
    if bounds.fixed_settings:
        return {}
    engine: dict[str, Any] = {}
    slots = draw(optional(st.integers(1, min(4, bounds.max_num_requests))))
    if slots is not UNSET:
        engine["max_num_requests"] = slots
    if draft:
        k = draw(optional(st.integers(0, bounds.max_draft)))
        if k is not UNSET:
            engine["max_draft_len"] = k
    if draw(st.booleans()):
        engine["verification"] = "strict"
    return engine


def _uptime(draw: st.DrawFn, bounds: TrafficBounds, run: dict[str, Any]) -> dict[str, Any]:
    """``run`` after warmup batches (some above max_num_requests) and prior traffic."""
    uptime = {**run, "name": "uptime"}
    sizes = st.one_of(
        st.integers(1, 4), st.integers(1, 4).map(lambda n: f"max+{n}"), st.just("max")
    )
    warmup = draw(st.lists(sizes, max_size=2))
    if warmup:
        uptime["warmup"] = warmup
    if draw(st.booleans()) or not warmup:
        tokens = max(1, min(6, bounds.context_length - PRIOR_PROMPT_TOKENS - 2))
        prior = {"requests": draw(st.integers(1, 6)), "max_tokens": draw(st.integers(1, tokens))}
        if draw(st.booleans()):
            prior["seeded"] = True
        uptime["prior_traffic"] = prior
    return uptime


def _judged(request: dict[str, Any]) -> bool:
    """Seeded or greedy: what the invariance checks compare."""
    return request.get("seed") is not None or request.get("temperature") == 0.0


def _expect(bounds: TrafficBounds, variant: str, runs: list[str], **extra: Any) -> list[Any]:
    return [
        {"check": check, "runs": runs[::-1] if check in K0_FIRST else runs, **extra}
        for check in VARIANT_CHECKS[variant]
        if check in bounds.comparisons
    ]


@st.composite
def invariance_cases(draw: st.DrawFn, bounds: TrafficBounds) -> dict[str, Any]:
    """A batch of requests and the runs that test its invariants."""
    # Each request with its arrival step: deleting one leaves the others' as they were.
    any_kind = st.one_of(*(requests(bounds, kind) for kind in bounds.kinds))
    arrival = st.one_of(st.just(0), st.integers(1, 8))
    pairs = draw(st.lists(st.tuples(any_kind, arrival), min_size=1, max_size=bounds.max_requests))
    drawn = [request for request, _ in pairs]
    count = len(drawn)
    _twin_seeds(draw, drawn)
    names = [f"r{i}" for i in range(count)]
    base: dict[str, Any] = {"name": "base", "requests": list(names)}
    arrivals = {name: step for name, (_, step) in zip(names, pairs, strict=True) if step}
    if arrivals:
        base["arrivals"] = arrivals
    engine = _engine(draw, bounds)
    if engine:
        base["engine"] = engine
    runs = [base]
    expect: list[Any] = []
    if draw(st.booleans()):
        runs.append({**base, "name": "again"})
        expect += _expect(bounds, "again", ["base", "again"])
    if count >= 2:
        alone = draw(st.one_of(st.none(), st.sampled_from(names)))
        if alone is not None and _judged(drawn[names.index(alone)]):
            run = {**base, "name": "alone", "requests": [alone]}
            arrival = base.get("arrivals", {}).get(alone)
            run["arrivals"] = {alone: arrival} if arrival else {}
            runs.append(run)
            expect += _expect(bounds, "alone", ["base", "alone"], requests=[alone])
        order = draw(st.one_of(st.none(), st.permutations(names)))
        if order is not None and order != names:
            runs.append({**base, "name": "permuted", "requests": order})
            expect += _expect(bounds, "permuted", ["base", "permuted"])
    if draw(st.booleans()):
        runs.append(_uptime(draw, bounds, base))
        expect += _expect(bounds, "uptime", ["base", "uptime"])
    if not bounds.fixed_settings and draw(st.booleans()):
        overlap = {**engine, "overlap_scheduler": True}
        runs.append({**base, "name": "overlap", "engine": overlap})
        expect += _expect(bounds, "overlap", ["base", "overlap"])
    k = engine.get("max_draft_len", bounds.max_draft_len)
    if not bounds.fixed_settings and k > 0 and draw(st.booleans()):
        runs.append({**base, "name": "k0", "engine": {**engine, "max_draft_len": 0}})
        expect += _expect(bounds, "k0", ["base", "k0"])
    return _scenario(dict(zip(names, drawn, strict=True)), runs, expect)


@st.composite
def statistical_cases(draw: st.DrawFn, bounds: TrafficBounds) -> dict[str, Any]:
    """Seeded sampled requests copied for the ``distribution`` check, with a K = 0 baseline
    for ``losslessness`` when the run speculates."""
    cheap = replace(bounds, max_tokens=min(4, bounds.max_tokens))
    drawn = draw(st.lists(requests(cheap, "seeded", copied=True), min_size=1, max_size=2))
    count = len(drawn)
    names = [f"r{i}" for i in range(count)]
    held = min(DISTRIBUTION_SAMPLES * count, 1024)
    engine = {**_engine(draw, bounds), "max_num_requests": held}
    if bounds.fixed_settings:
        engine = {}
    runs: list[dict[str, Any]] = [{"name": "base", "requests": list(names)}]
    if engine:
        runs[0]["engine"] = engine
    expect: list[Any] = []
    k = engine.get("max_draft_len", bounds.max_draft_len)
    if not bounds.fixed_settings and k > 0 and draw(st.booleans()):
        runs.append(
            {
                "name": "baseline",
                "requests": list(names),
                "baseline_of": "base",
                "engine": {"max_num_requests": held},
            }
        )
        expect += _expect(bounds, "baseline", ["base", "baseline"])
    scenario = _scenario(dict(zip(names, drawn, strict=True)), runs, expect)
    scenario["distribution"] = {"samples": DISTRIBUTION_SAMPLES}
    return scenario


def _scenario(
    requests: dict[str, dict[str, Any]], runs: list[dict[str, Any]], expect: list[Any]
) -> dict[str, Any]:
    runs = copy.deepcopy(runs)  # runs drawn from base share its dicts
    for run in runs:
        if not run.get("arrivals"):
            run.pop("arrivals", None)
        if not run.get("engine"):
            run.pop("engine", None)
    scenario: dict[str, Any] = {
        "name": "search",
        "description": "Drawn by specseed search.",
        "requests": requests,
        "runs": runs,
    }
    if expect:
        scenario["expect"] = expect
    return scenario


def cases(bounds: TrafficBounds) -> st.SearchStrategy[dict[str, Any]]:
    """Every case the search draws: invariance cases, and one in
    :data:`STATISTICAL_ODDS` statistical (when ``bounds.statistical`` and seeded sampled
    requests are drawn: a statistical case copies one)."""
    if not bounds.statistical or "seeded" not in bounds.kinds:
        return invariance_cases(bounds)

    @st.composite
    def either(draw: st.DrawFn) -> dict[str, Any]:
        if draw(st.integers(0, STATISTICAL_ODDS - 1)) == STATISTICAL_ODDS - 1:
            return draw(statistical_cases(bounds))
        return draw(invariance_cases(bounds))

    return either()


def is_statistical(scenario: Mapping[str, Any]) -> bool:
    """Whether a drawn case is judged by the statistical checks."""
    return "distribution" in scenario


__all__ = [
    "CORE_FIELDS",
    "EDGE_SEEDS",
    "K0_FIRST",
    "MAX_KNOBS",
    "REQUEST_FIELDS",
    "UNSET",
    "VARIANT_CHECKS",
    "TrafficBounds",
    "cases",
    "field_strategies",
    "generic_field",
    "is_statistical",
]
