"""Checks of the sampling knobs beyond temperature, top-k and top-p: each knob acts as it
should, and identically with and without speculation.

Run checks judge one run from what any engine returns (tokens, and the finish reasons and
log-probabilities where it reports them): ``stop-boundaries`` (no request passes max_tokens or
a stop token, and its finish reason fits how it ended), ``logprobs-sane`` (reported
log-probabilities are probabilities, and agree with themselves), ``children-distinct`` (the
children of ``n`` differ) and ``knobs-honoured`` (the knobs whose effect needs no model: a
banned token never comes, a forced one always does, min_p 1 samples the greedy tokens, and a
top-k request at temperature 1 is not greedy). The comparison ``knob-equivalence`` holds a
speculative run's greedy requests to the K = 0 run's tokens, finish reasons and
log-probabilities.

A run whose engine refused a knob never reaches these checks: it is unserved, and every check
skips quoting the refusal (``RunTrace.unserved``). A knob an engine silently ignores fails
here, named by its evidence.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence

from specseed.checks.context import CheckContext
from specseed.checks.findings import ATTRIBUTION_TEXT, Finding, Suspect, TokenDiff
from specseed.checks.registry import comparison_check, run_check
from specseed.checks.request_streams import broad
from specseed.checks.token_suspects import TokenDivergence
from specseed.checks.trace_evidence import emission_map, stream_diff
from specseed.core.wording import plural
from specseed.scenarios.schema import Expectation
from specseed.traces.records import (
    FILTER_KNOBS,
    PENALTY_KNOBS,
    RequestInfo,
    RunTrace,
    TokenLogprob,
)

MIN_TOKENS_FOR_IDENTITY = 8
"""Shorter identical outputs prove nothing: peaked distributions repeat short outputs."""
LOGPROB_TOLERANCE = 0.05
"""Largest difference (nats) between two reports of one token's log-probability at one prefix
that passes: wide enough for the batch-shape differences of bfloat16 engines between K = 0 and
speculative forwards, narrow enough that a fabricated 0.0 shows for any token of probability
below 0.95."""
BAN = -100.0
"""A ``logit_bias`` at or below this bans its token (OpenAI: -100 "should result in a ban")."""
FORCE = 100.0
"""A ``logit_bias`` at or above this forces its token ("exclusive selection")."""
MAX_DETAILS = 12


def _scenario(trace: RunTrace) -> list[RequestInfo]:
    return [r for r in trace.header.requests if r.phase == "scenario"]


def _judgeable(trace: RunTrace) -> bool:
    return not trace.failed and trace.unserved is None


def _speculates(trace: RunTrace) -> bool:
    return trace.header.engine_config.max_draft_len > 0


def _baselines(ctx: CheckContext, trace: RunTrace) -> list[RunTrace]:
    """The scenario's served K = 0 runs, for a speculative run (none for a K = 0 run): where
    a request that fails on the speculative path may show it holds without speculation."""
    if not _speculates(trace):
        return []
    return [
        t for t in ctx.traces.values() if t is not trace and not _speculates(t) and _judgeable(t)
    ]


def _fail(trace: RunTrace, problems: list[tuple[str, str, Suspect | None]]) -> Finding:
    """One failing finding of a run from (request, problem, suspect) items."""
    suspects = tuple(dict.fromkeys(s for _, _, s in problems if s is not None))
    first = problems[0][1]
    more = f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""
    return Finding(
        status="fail",
        message=f"{trace.name}: {first}{more}",
        runs=(trace.name,),
        requests=tuple(dict.fromkeys(r for r, _, _ in problems)),
        suspects=suspects,
        details=tuple(p for _, p, _ in problems[:MAX_DETAILS]),
    )


# -- stop-boundaries ----------------------------------------------------------------------


@run_check(
    "stop-boundaries",
    short="stop",
    title="Requests stop where they must",
    description="No request emits more than max_tokens or any token after one of its "
    "stop_token_ids, and its finish reason fits how it ended (length only at max_tokens).",
    targets=("tokens-past-stop",),
    needs=("tokens",),
)
def stop_boundaries(ctx: CheckContext, trace: RunTrace) -> Iterator[Finding]:
    if not _judgeable(trace):
        return
    problems: list[tuple[str, str, Suspect | None]] = []
    checked = 0
    for info in _scenario(trace):
        tokens = trace.end.outputs.get(info.request_id)
        if tokens is None:
            continue
        checked += 1
        rid = info.request_id
        if len(tokens) > info.max_tokens:
            problems.append(
                (
                    rid,
                    f"{rid} emitted {len(tokens)} tokens, more than max_tokens {info.max_tokens}",
                    None,
                )
            )
        stops = set(info.stop_token_ids or ())
        early = next((i for i, t in enumerate(tokens[:-1]) if t in stops), None)
        if early is not None:
            problems.append(
                (
                    rid,
                    f"{rid} emitted stop token {tokens[early]} at position {early}, then "
                    f"{plural(len(tokens) - early - 1, 'more token')}",
                    Suspect(
                        "tokens-past-stop",
                        f"{rid} went on past its stop token {tokens[early]} (position {early})",
                    ),
                )
            )
        reason = trace.end.finish_reasons.get(rid)
        if reason == "length" and len(tokens) < info.max_tokens:
            problems.append(
                (
                    rid,
                    f"{rid} ended after {len(tokens)} of max_tokens {info.max_tokens} with "
                    "finish reason length",
                    None,
                )
            )
        if reason == "length" and tokens and tokens[-1] in stops:
            problems.append(
                (rid, f"{rid} ended on its stop token {tokens[-1]} with finish reason length", None)
            )
    if not checked:
        return
    if problems:
        yield _fail(trace, problems)
        return
    reported = sum(1 for r in _scenario(trace) if r.request_id in trace.end.finish_reasons)
    if not reported and not any(r.stop_token_ids for r in _scenario(trace)):
        return  # token counts alone: a pass would claim more than was seen
    yield Finding(
        status="pass",
        message=f"{trace.name}: {plural(checked, 'request')} within max_tokens and their stop "
        f"tokens ({reported} finish reasons consistent)",
        runs=(trace.name,),
    )


# -- logprobs-sane --------------------------------------------------------------------------


def _logprob_problems(
    rid: str, info: RequestInfo, tokens: Sequence[int], reported: Sequence[TokenLogprob]
) -> list[tuple[str, str, Suspect | None]]:
    if len(reported) != len(tokens):
        return [
            (
                rid,
                f"{rid} asked logprobs {info.logprobs}: {len(reported)} reported for "
                f"{plural(len(tokens), 'token')}",
                None,
            )
        ]
    problems: list[tuple[str, str, Suspect | None]] = []
    for position, (token, entry) in enumerate(zip(tokens, reported, strict=True)):
        top = dict(entry.top)
        where = f"{rid} token {position} ({token})"
        if not (math.isfinite(entry.logprob) and entry.logprob <= 1e-6):
            problems.append(
                (rid, f"{where}: log-probability {entry.logprob!r} is no log-probability", None)
            )
        elif len(entry.top) > (info.logprobs or 0) + 1:
            problems.append(
                (rid, f"{where}: {len(entry.top)} top entries for logprobs {info.logprobs}", None)
            )
        elif token in top and abs(top[token] - entry.logprob) > LOGPROB_TOLERANCE:
            problems.append(
                (
                    rid,
                    f"{where}: reported log-probability {entry.logprob:.4g}, but "
                    f"{top[token]:.4g} in its own top-{info.logprobs}",
                    Suspect(
                        "fake-logprobs",
                        f"{where} is reported with log-probability {entry.logprob:.4g} while "
                        f"its own top list gives it {top[token]:.4g}: not the target's",
                    ),
                )
            )
        elif sum(math.exp(v) for v in {**top, token: entry.logprob}.values()) > 1.0 + 1e-3:
            problems.append((rid, f"{where}: reported probabilities sum past 1", None))
        elif any(a < b - 1e-6 for (_, a), (_, b) in zip(entry.top, entry.top[1:], strict=False)):
            problems.append(
                (rid, f"{where}: top log-probabilities are not in descending order", None)
            )
        if problems:
            break  # the first bad token of a request says it
    return problems


def _sound_logprobs(trace: RunTrace, rid: str) -> bool:
    """Whether ``trace`` reports log-probabilities for ``rid``, all of them sound."""
    tokens, reported = trace.end.outputs.get(rid), trace.end.logprobs.get(rid)
    if not tokens or reported is None:
        return False
    return not _logprob_problems(rid, trace.request(rid), tokens, reported)


@run_check(
    "logprobs-sane",
    short="lp",
    title="Log-probabilities are probabilities",
    description="Where a request asked logprobs, the engine reports one per emitted token: "
    "at most 0, the top-n at most n (+1 for the chosen token) in descending order, summing to "
    "at most 1, and the chosen token's equal to its own entry in the top-n.",
    targets=("fake-logprobs",),
    needs=("tokens",),
)
def logprobs_sane(ctx: CheckContext, trace: RunTrace) -> Iterator[Finding]:
    if not _judgeable(trace):
        return
    asked = [
        r for r in _scenario(trace) if r.logprobs is not None and r.request_id in trace.end.outputs
    ]
    if not asked:
        return
    if not trace.end.logprobs:
        yield Finding(
            status="skip",
            message=f"{trace.name}: no log-probabilities recorded for the "
            f"{plural(len(asked), 'request')} that asked (the engine or its adapter reports "
            "none)",
            runs=(trace.name,),
        )
        return
    problems: list[tuple[str, str, Suspect | None]] = []
    for info in asked:
        rid = info.request_id
        reported = trace.end.logprobs.get(rid)
        mine: list[tuple[str, str, Suspect | None]]
        if reported is None:
            mine = [(rid, f"{rid} asked logprobs {info.logprobs} and got none", None)]
        else:
            mine = _logprob_problems(rid, info, trace.end.outputs[rid], reported)
        if mine and not any(s for _, _, s in mine):
            sound = next((b.name for b in _baselines(ctx, trace) if _sound_logprobs(b, rid)), None)
            if sound is not None:
                suspect = Suspect(
                    "fake-logprobs",
                    f"{rid}'s log-probabilities are unsound in {trace.name} ({mine[0][1]}) and "
                    f"sound in {sound}, without speculation: not the target's on the "
                    "speculative path",
                )
                mine = [(r, text, suspect) for r, text, _ in mine]
        problems.extend(mine)
    if problems:
        yield _fail(trace, problems)
        return
    tokens = sum(len(trace.end.logprobs[r.request_id]) for r in asked)
    yield Finding(
        status="pass",
        message=f"{trace.name}: log-probabilities of {plural(tokens, 'token')} "
        f"({plural(len(asked), 'request')}) consistent",
        runs=(trace.name,),
    )


# -- children-distinct ---------------------------------------------------------------------


def _controls(trace: RunTrace, parent: RequestInfo) -> list[str]:
    """Seeded requests of the run with the parent's prompt and sampling but no ``n``: what
    the children must not be, as they must not be each other."""
    key = (parent.prompt_ids, parent.temperature, parent.top_k, parent.top_p, parent.max_tokens)
    knobs = {k: v for k, v in parent.knobs().items() if k != "n"}
    return [
        r.request_id
        for r in _scenario(trace)
        if (r.n or 1) == 1
        and r.parent is None
        and r.seed is not None
        and (r.prompt_ids, r.temperature, r.top_k, r.top_p, r.max_tokens) == key
        and r.knobs() == knobs
        and r.request_id in trace.end.outputs
    ]


def _children(trace: RunTrace, parent: RequestInfo) -> list[str]:
    ids = [parent.request_id]
    ids += [r.request_id for r in _scenario(trace) if r.parent == parent.request_id]
    return ids


def _unsampled_on_speculation(
    ctx: CheckContext, trace: RunTrace, ids: Sequence[str]
) -> Suspect | None:
    """unset-temperature-greedy, where differently seeded sampled requests emitted one stream
    on a speculative run and distinct ones in a K = 0 run of the scenario: the speculative
    path decoded them as if greedy."""
    for base in _baselines(ctx, trace):
        streams = [base.end.outputs.get(i) for i in ids]
        if all(streams) and len({tuple(s or ()) for s in streams}) == len(ids):
            return Suspect(
                "unset-temperature-greedy",
                f"{', '.join(ids)} (differently seeded, sampled) emitted one stream in "
                f"{trace.name} and {len(ids)} distinct ones in {base.name}, without "
                "speculation: the speculative path did not sample them (as at a greedy "
                "temperature)",
            )
    return None


@run_check(
    "children-distinct",
    short="n",
    title="Children of n are distinct",
    description="A sampled request with n > 1 gets n completions, each on a stream of its "
    "own: none missing, and no two identical over 8 tokens or more.",
    targets=("children-shared-stream",),
    needs=("tokens",),
)
def children_distinct(ctx: CheckContext, trace: RunTrace) -> Iterator[Finding]:
    if not _judgeable(trace):
        return
    # Narrow sampling (top_k 1, a low temperature, min_p, logit_bias) repeats itself on a
    # correct engine: only children sampled broadly must differ.
    parents = [r for r in _scenario(trace) if (r.n or 1) > 1 and broad(r)]
    if not parents:
        return
    problems: list[tuple[str, str, Suspect | None]] = []
    for parent in parents:
        ids = _children(trace, parent)
        got = [i for i in ids if i in trace.end.outputs]
        if len(got) < (parent.n or 1):
            problems.append(
                (
                    parent.request_id,
                    f"{parent.request_id} asked n {parent.n}: {len(got)} completions returned",
                    None,
                )
            )
            continue
        controls = _controls(trace, parent)
        for a_index, a in enumerate(got):
            for b in got[a_index + 1 :]:
                x, y = trace.end.outputs[a], trace.end.outputs[b]
                if x != y or len(x) < MIN_TOKENS_FOR_IDENTITY:
                    continue
                alike = [c for c in controls if trace.end.outputs.get(c) == x]
                if alike:
                    # A request of its own emitted them too: streams are shared across
                    # requests (distinct-seeds says how), not among children only; or,
                    # where the same requests differ without speculation, the speculative
                    # path did not sample at all.
                    problems.append(
                        (
                            parent.request_id,
                            f"children {a} and {b} of {parent.request_id} (n {parent.n}) "
                            f"emitted the same {plural(len(x), 'token')}, as did {alike[0]}, a "
                            "request of its own",
                            _unsampled_on_speculation(ctx, trace, (a, b, alike[0])),
                        )
                    )
                    continue
                held = (
                    f" (while {controls[0]}, the same request on its own, differs)"
                    if controls
                    else ""
                )
                problems.append(
                    (
                        parent.request_id,
                        f"children {a} and {b} of {parent.request_id} (n {parent.n}) emitted "
                        f"the same {plural(len(x), 'token')}" + held,
                        Suspect(
                            "children-shared-stream",
                            f"children {a} and {b} of one request are identical"
                            + held
                            + ": one stream for both",
                        ),
                    )
                )
    if problems:
        yield _fail(trace, problems)
        return
    yield Finding(
        status="pass",
        message=f"{trace.name}: the children of {plural(len(parents), 'request')} with n > 1 "
        "are distinct",
        runs=(trace.name,),
    )


# -- knobs-honoured -------------------------------------------------------------------------


def _twin_key(info: RequestInfo) -> tuple[object, ...]:
    """What a request and its greedy twin share: prompt, length, and the knobs that change
    logits (not min_p, logprobs or n, which leave the greedy tokens alone)."""
    knobs = {k: v for k, v in info.knobs().items() if k not in ("min_p", "logprobs", "n")}
    return (info.prompt_ids, info.max_tokens, tuple(sorted(knobs.items())))


def _greedy_twins(trace: RunTrace) -> dict[tuple[object, ...], RequestInfo]:
    twins: dict[tuple[object, ...], RequestInfo] = {}
    for info in _scenario(trace):
        if info.temperature == 0 and info.parent is None and info.request_id in trace.end.outputs:
            twins.setdefault(_twin_key(info), info)
    return twins


def _plain_twins(trace: RunTrace, info: RequestInfo) -> list[RequestInfo]:
    """The run's greedy requests with ``info``'s prompt and length and no knob but logprobs:
    what ``info`` emits without its knobs."""
    return [
        r
        for r in _scenario(trace)
        if r.request_id != info.request_id
        and r.temperature == 0
        and (r.prompt_ids, r.max_tokens) == (info.prompt_ids, info.max_tokens)
        and not set(r.knobs()) - {"logprobs"}
    ]


def _penalty_problem(trace: RunTrace, info: RequestInfo, tokens: Sequence[int]) -> str | None:
    """Whether a greedy request's positive presence/frequency penalty acted where its twin's
    own log-probabilities say it must: at the first repeat of the twin (same prompt, no knob
    but logprobs) where the penalty puts another of the twin's top tokens above the repeated
    one, the request must leave the twin (before it, the penalty lowers only tokens already
    emitted, never the chosen new one). None: nothing to judge; "": it acted; else the
    problem."""
    knobs = info.knobs()
    presence = float(knobs.pop("presence_penalty", 0.0) or 0.0)
    frequency = float(knobs.pop("frequency_penalty", 0.0) or 0.0)
    knobs.pop("logprobs", None)
    if info.temperature != 0 or knobs or presence < 0 or frequency < 0 or not presence + frequency:
        return None
    twin = next(
        (
            r
            for r in _plain_twins(trace, info)
            if r.logprobs is not None and trace.end.logprobs.get(r.request_id)
        ),
        None,
    )
    if twin is None:
        return None
    plain = trace.end.outputs.get(twin.request_id, ())
    reported = trace.end.logprobs[twin.request_id]
    counts: dict[int, int] = {}
    for position, (token, entry) in enumerate(zip(plain, reported, strict=False)):
        if position >= len(tokens) or tokens[position] != token:
            return ""  # the request left its twin: the penalty acted

        def score(candidate: int, logprob: float) -> float:
            seen = counts.get(candidate, 0)
            return logprob - presence * (seen > 0) - frequency * seen

        if counts.get(token) and len(entry.top) >= 2:
            mine = score(token, entry.logprob)
            best = max(((score(t, v), t, v) for t, v in entry.top if t != token), default=None)
            if best is not None and best[0] > mine + 1e-3:
                return (
                    f"{info.request_id} emitted {twin.request_id}'s token {token} at position "
                    f"{position} again, though its penalty (presence {presence:g}, frequency "
                    f"{frequency:g}) puts token {best[1]} above it ({best[0]:.3g} against "
                    f"{mine:.3g}, from {twin.request_id}'s log-probabilities)"
                )
        counts[token] = counts.get(token, 0) + 1
    # Followed its twin all the way, and no position asked the penalty to act: nothing seen
    # either way (a dropped penalty would look the same).
    return None


def _filter_problems(
    trace: RunTrace,
    info: RequestInfo,
    tokens: Sequence[int],
    twins: dict[tuple[object, ...], RequestInfo],
) -> tuple[list[str], list[str]]:
    """The filters whose effect needs no model, on one request: what was checked (banned
    and forced tokens of logit_bias, min_p 1 against the greedy twin) and the problems."""
    rid = info.request_id
    checked: list[str] = []
    problems: list[str] = []
    bias = dict(info.logit_bias or ())
    # A penalty can undo a bias of 100 on a correct engine (repetition_penalty 2 halves a
    # forced prompt token's logit; one below 1 lifts a banned one toward 0): judged only
    # where no penalty acts.
    knobs = info.knobs()
    penalised_too = bool(
        knobs.get("presence_penalty")
        or knobs.get("frequency_penalty")
        or knobs.get("repetition_penalty", 1.0) != 1.0
    )
    banned = {t for t, b in bias.items() if b <= BAN} if not penalised_too else set()
    forced = {t for t, b in bias.items() if b >= FORCE} if not penalised_too else set()
    if any(0 < b < FORCE for b in bias.values()):
        # Another token lifted too (+91 beside +100, found by specseed search): the model's
        # own logits can close a gap that small, so nothing is forced.
        forced = set()
    if banned:
        checked.append(f"{rid} (banned tokens)")
        hit = next((i for i, t in enumerate(tokens) if t in banned), None)
        if hit is not None:
            problems.append(
                f"{rid} emitted token {tokens[hit]} at position {hit} despite its "
                f"logit_bias {bias[tokens[hit]]:g}"
            )
    if forced:
        checked.append(f"{rid} (forced tokens)")
        stops = set(info.stop_token_ids or ())
        miss = next((i for i, t in enumerate(tokens) if t not in forced and t not in stops), None)
        if miss is not None:
            problems.append(
                f"{rid} emitted token {tokens[miss]} at position {miss}, though logit_bias "
                f"+{FORCE:g} forces {sorted(forced)}"
            )
    twin = twins.get(_twin_key(info))
    if info.min_p == 1.0 and info.temperature != 0 and info.parent is None and twin is not None:
        checked.append(f"{rid} (min_p 1)")
        twin_tokens = trace.end.outputs[twin.request_id]
        if list(tokens) != list(twin_tokens):
            position = _common_prefix(tokens, twin_tokens)
            problems.append(
                f"{rid} (min_p 1, temperature {info.temperature:g}) leaves its greedy twin "
                f"{twin.request_id} at token {position}: min_p 1 keeps only the most probable "
                "token"
            )
    return checked, problems


def _dropped_on_speculation(
    ctx: CheckContext, trace: RunTrace, info: RequestInfo, checked: list[str]
) -> Suspect | None:
    """spec-knobs-dropped, where a K = 0 run of the scenario shows the same request's filters
    held (the same ones checked, none failing): they failed on the speculative path only."""
    rid = info.request_id
    for base in _baselines(ctx, trace):
        tokens = base.end.outputs.get(rid)
        if not tokens:
            continue
        held, failed = _filter_problems(base, base.request(rid), tokens, _greedy_twins(base))
        if held == checked and not failed:
            return Suspect(
                "spec-knobs-dropped",
                f"{rid}'s {', '.join(k for k in sorted(info.knobs()) if k in FILTER_KNOBS)} "
                f"held in {base.name}, without speculation, and not in {trace.name}: the knob "
                "did not act on the speculative path",
            )
    return None


@run_check(
    "knobs-honoured",
    short="knobs",
    title="Knobs act as they must",
    description="The knobs whose effect needs no model: a token with logit_bias -100 never "
    "comes and one with +100 always does, a penalised greedy request leaves its twin where "
    "the twin's own log-probabilities say the penalty must win, a sampled request with min_p "
    "1 emits its greedy twin's tokens, and sampled top-k/top-p requests at temperature 1 are "
    "not all greedy.",
    targets=("spec-knobs-dropped", "unset-temperature-greedy"),
    needs=("tokens",),
)
def knobs_honoured(ctx: CheckContext, trace: RunTrace) -> Iterator[Finding]:
    if not _judgeable(trace):
        return
    problems: list[tuple[str, str, Suspect | None]] = []
    verified: list[str] = []
    twins = _greedy_twins(trace)
    filtered_pairs: list[tuple[str, str, bool]] = []
    for info in _scenario(trace):
        rid = info.request_id
        tokens = trace.end.outputs.get(rid)
        if not tokens:
            continue
        checked, failed = _filter_problems(trace, info, tokens, twins)
        verified.extend(checked)
        if failed:
            suspect = _dropped_on_speculation(ctx, trace, info, checked)
            problems.extend((rid, problem, suspect) for problem in failed)
        penalised = _penalty_problem(trace, info, tokens)
        if penalised is not None:
            verified.append(f"{rid} (penalties)")
            if penalised:
                problems.append((rid, penalised, None))
        if info.temperature == 0 or info.parent is not None:
            continue
        twin = twins.get(_twin_key(info))
        if twin is None:
            continue
        twin_tokens = trace.end.outputs[twin.request_id]
        if (
            not info.min_p
            and info.temperature == 1.0
            and (info.top_k > 1 or info.top_p < 1.0)
            and len(tokens) >= MIN_TOKENS_FOR_IDENTITY
        ):
            filtered_pairs.append((rid, twin.request_id, tokens == twin_tokens))
    if len(filtered_pairs) >= 2:
        verified.append(f"{len(filtered_pairs)} sampled top-k/top-p requests")
        if all(same for _, _, same in filtered_pairs):
            names = ", ".join(f"{a} = {b}" for a, b, _ in filtered_pairs)
            suspect = (
                Suspect(
                    "unset-temperature-greedy",
                    f"every sampled top-k/top-p request at temperature 1 emitted its greedy "
                    f"twin's tokens ({names}): decoded at a greedy temperature",
                )
                if _speculates(trace)
                else None
            )
            for a, b, _ in filtered_pairs:
                problems.append(
                    (
                        a,
                        f"{a} (temperature 1, sampled) emitted exactly the greedy {b}'s tokens",
                        suspect,
                    )
                )
    if not verified:
        asked = [
            info.request_id
            for info in _scenario(trace)
            if set(info.knobs()) & {"presence_penalty", "frequency_penalty", *FILTER_KNOBS}
        ]
        if asked:
            # Knobs were sent, yet no token showed whether they acted (a penalised stream
            # that never met a repeat its penalty must break): not judged, never passed.
            yield Finding(
                status="skip",
                message=f"{trace.name}: no token of {', '.join(asked[:4])}"
                f"{' and more' if len(asked) > 4 else ''} shows whether its knobs acted",
                runs=(trace.name,),
            )
        return
    if problems:
        yield _fail(trace, problems)
        return
    yield Finding(
        status="pass",
        message=f"{trace.name}: knobs act as they must: {', '.join(verified)}",
        runs=(trace.name,),
    )


# -- knob-equivalence -----------------------------------------------------------------------


def _logprob_mismatch(
    base: Sequence[TokenLogprob], other: Sequence[TokenLogprob], agree: int
) -> tuple[int, float, float] | None:
    """The first token (of the first ``agree``, where both runs emitted the same) whose
    reported log-probability differs beyond the tolerance: (position, K = 0, speculative)."""
    for position in range(min(agree, len(base), len(other))):
        a, b = base[position].logprob, other[position].logprob
        if not (math.isfinite(a) and math.isfinite(b)) or abs(a - b) > LOGPROB_TOLERANCE:
            return position, a, b
        top_b = dict(other[position].top)
        for token, value in base[position].top:
            if token in top_b and abs(top_b[token] - value) > LOGPROB_TOLERANCE:
                return position, value, top_b[token]
    return None


def _logprob_suspect(
    base: RunTrace, other: RunTrace, rid: str, position: int, was: float, now: float
) -> Suspect:
    """Why one token's reported log-probability differs between the runs: the target logits
    behind it differ (numerics), or the same logits were reported otherwise (not the
    target's: 0.0, or another distribution's)."""
    fingerprints = [[at.fingerprint for at in emission_map(trace, rid)] for trace in (base, other)]
    seen = all(len(f) > position and f[position] for f in fingerprints)
    if seen and fingerprints[0][position] != fingerprints[1][position]:
        return Suspect(
            "greedy-drift",
            f"{rid} token {position}: the target logits behind it differ between "
            f"{base.name} and {other.name}, and so do its log-probabilities",
        )
    return Suspect(
        "fake-logprobs",
        f"{rid} token {position}: log-probability {was:.4g} in {base.name}, reported as "
        f"{now:.4g} in {other.name} for the same token after the same tokens",
    )


def _common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def _greedy(trace: RunTrace, compared: Iterable[str]) -> list[RequestInfo]:
    wanted = set(compared)
    return [r for r in _scenario(trace) if r.temperature == 0 and r.request_id in wanted]


def _divergence_suspects(
    diff: TokenDiff, base: RunTrace, other: RunTrace, compared: Iterable[str]
) -> list[Suspect]:
    """Which defects a greedy request's divergence from K = 0 fits, given how the other
    compared requests fared: a request with logit_bias or min_p (and no penalty) that held
    rules a knob dropped on the speculative path out; a request without knobs that diverged
    too points at numerics."""
    requests = _greedy(base, compared)
    held = {
        r.request_id
        for r in requests
        if r.request_id in other.end.outputs
        and base.end.outputs.get(r.request_id) == other.end.outputs[r.request_id]
    }
    # logprobs reports, it changes no token: a request that sets only it is a control too.
    knobs_of = {
        r.request_id: {k: v for k, v in r.knobs().items() if k != "logprobs"} for r in requests
    }
    filters_held = any(
        any(k in knobs for k in FILTER_KNOBS)
        and not any(k in knobs for k in PENALTY_KNOBS)
        and rid in held
        for rid, knobs in knobs_of.items()
    )
    control_diverged = any(not knobs and rid not in held for rid, knobs in knobs_of.items())
    info = base.request(diff.request)
    rid = info.request_id
    left, right = base.end.outputs.get(rid, ()), other.end.outputs.get(rid, ())
    shorter, longer = (left, right) if len(left) < len(right) else (right, left)
    short_run = base if shorter is left else other
    stops = set(info.stop_token_ids or ())
    if longer[: len(shorter)] == shorter and (
        short_run.end.finish_reasons.get(rid) == "stop" or (shorter and shorter[-1] in stops)
    ):
        long_run = other if short_run is base else base
        return [
            Suspect(
                "tokens-past-stop",
                f"{rid} stopped after {plural(len(shorter), 'token')} in {short_run.name} and "
                f"went on past that stop to {len(longer)} in {long_run.name}",
            )
        ]
    if diff.attribution in ("logits", "rng-state-and-logits"):
        return [
            Suspect(
                "greedy-drift",
                f"{rid}: the target logits behind token {diff.position} differ between "
                f"{base.name} and {other.name}",
            )
        ]
    knobs = knobs_of.get(rid) or {k: v for k, v in info.knobs().items() if k != "logprobs"}
    never = _penalties_never_acted(base, other, info, knobs)
    if never is not None:
        return [Suspect("spec-knobs-dropped", never)]
    suspects: list[Suspect] = []
    if any(k in knobs for k in FILTER_KNOBS) or (
        any(k in knobs for k in PENALTY_KNOBS) and not filters_held
    ):
        suspects.append(
            Suspect(
                "spec-knobs-dropped",
                f"{rid} ({', '.join(sorted(knobs))}) diverges from K = 0 at token "
                f"{diff.position} with the same target logits: the knobs did not act on the "
                "speculative path",
            )
        )
    if any(k in knobs for k in PENALTY_KNOBS):
        suspects.append(
            Suspect(
                "penalty-stale-in-step",
                f"{rid} ({', '.join(k for k in PENALTY_KNOBS if k in knobs)}) diverges from K = 0 "
                f"at token {diff.position}: the penalties counted other tokens on the "
                "speculative path",
            )
        )
    if not knobs or control_diverged:
        suspects.append(
            Suspect(
                "greedy-drift",
                f"{rid} diverges from K = 0 at token {diff.position}"
                + ("" if not knobs else ", as does a greedy request without knobs"),
            )
        )
    return suspects


def _penalties_never_acted(
    base: RunTrace, other: RunTrace, info: RequestInfo, knobs: dict[str, object]
) -> str | None:
    """Why the penalties of a greedy request that diverged were dropped on the speculative
    run, not fed stale: there it emitted its unpenalised twin's tokens (same prompt and
    length, greedy, no knob but logprobs), all of them, while without speculation the
    penalties moved it off them. A penalty state fed stale still counts the tokens of earlier
    steps, so it acts somewhere in a stream that repeats. None where that is not so."""
    penalties = [k for k in PENALTY_KNOBS if k in knobs]
    if not penalties or set(knobs) - set(PENALTY_KNOBS):
        return None
    rid = info.request_id
    mine = other.end.outputs.get(rid)
    for twin in _plain_twins(other, info):
        tid = twin.request_id
        if twin.parent is not None:
            continue
        theirs, plain, penalised = (
            other.end.outputs.get(tid),
            base.end.outputs.get(tid),
            base.end.outputs.get(rid),
        )
        if mine and theirs == mine and plain is not None and penalised is not None:
            if plain == penalised:
                continue  # the penalties changed nothing without speculation either
            left = _common_prefix(plain, penalised)
            return (
                f"{rid} ({', '.join(penalties)}) emitted exactly its unpenalised twin {tid}'s "
                f"{plural(len(mine), 'token')} in {other.name}, while in {base.name} its "
                f"penalties moved it off them at token {left}: they never acted on the "
                "speculative path"
            )
    return None


def _token_suspects(divergence: TokenDivergence) -> list[Suspect]:
    """The rule for a divergence seen in tokens only: what the request's knobs, its stop and
    the other compared requests support (``_divergence_suspects``)."""
    return _divergence_suspects(
        divergence.diff, divergence.left, divergence.right, divergence.compared
    )


@comparison_check(
    "knob-equivalence",
    short="knobspec",
    title="Knobs act alike with and without speculation",
    description="Greedy requests (with knobs or without) give the same tokens, finish reasons "
    f"and log-probabilities (within {LOGPROB_TOLERANCE} nats, the same tokens at the same "
    "prefix) with speculation as in the K = 0 run named first; sampled requests are left to "
    "losslessness.",
    targets=("spec-knobs-dropped", "penalty-stale-in-step", "tokens-past-stop", "fake-logprobs"),
    token_suspects=_token_suspects,
)
def knob_equivalence(ctx: CheckContext, expectation: Expectation) -> Iterator[Finding]:
    runs = tuple(expectation.runs)
    traces = [ctx.traces[r] for r in runs]
    stopped = [t.name for t in traces if t.end.failure and t.end.failure.exception == "Interrupted"]
    if stopped:
        yield Finding(status="skip", message=f"run {', '.join(stopped)} was interrupted", runs=runs)
        return
    broken = [t.name for t in traces if t.failed]
    if broken:
        yield Finding(
            status="error",
            message=f"cannot compare knobs: run {', '.join(broken)} did not complete "
            "(see runs-complete)",
            runs=runs,
        )
        return
    base = traces[0]
    if _speculates(base):
        yield Finding(
            status="skip",
            message=f"knob-equivalence compares against a K = 0 run named first; {base.name} "
            f"has max_draft_len {base.header.engine_config.max_draft_len}",
            runs=runs,
        )
        return
    if not any(_speculates(t) for t in traces[1:]):
        yield Finding(
            status="skip",
            message=f"no run of {', '.join(runs)} speculates (max_draft_len 0 in each): "
            "nothing to compare the K = 0 run with",
            runs=runs,
        )
        return
    wanted = set(expectation.requests) if expectation.requests is not None else None
    requests = [
        info
        for info in _scenario(base)
        if info.temperature == 0
        and (wanted is None or info.request_id in wanted or info.parent in wanted)
        and all(info.request_id in t.end.outputs for t in traces)
    ]
    if not requests:
        yield Finding(
            status="skip", message=f"no greedy request served in {', '.join(runs)}", runs=runs
        )
        return
    problems: list[str] = []
    found_suspects: list[Suspect] = []
    diffs: list[TokenDiff] = []
    groups: list[tuple[str, tuple[str, ...]]] = []
    affected: list[str] = []
    for other in traces[1:]:
        token_diffs = {
            info.request_id: d
            for info in requests
            if (d := stream_diff(base, other, info.request_id)) is not None
        }
        compared = [info.request_id for info in requests]
        for info in requests:
            rid = info.request_id
            diff = token_diffs.get(rid)
            if diff is not None:
                found = _divergence_suspects(diff, base, other, compared)
                diffs.append(diff)
                groups.append((rid, tuple(s.defect for s in found)))
                affected.append(rid)
                problems.append(
                    f"{rid} first diverges at token {diff.position} ({base.name} vs "
                    f"{other.name}): {ATTRIBUTION_TEXT[diff.attribution]}"
                )
                found_suspects.extend(found)
                continue
            a, b = base.end.finish_reasons.get(rid), other.end.finish_reasons.get(rid)
            if a is not None and b is not None and a != b:
                affected.append(rid)
                groups.append((rid, ()))
                problems.append(f"{rid}: finish reason {a} in {base.name}, {b} in {other.name}")
            mismatch = _logprob_mismatch(
                base.end.logprobs.get(rid, ()),
                other.end.logprobs.get(rid, ()),
                _common_prefix(base.end.outputs[rid], other.end.outputs[rid]),
            )
            if mismatch is not None:
                position, was, now = mismatch
                affected.append(rid)
                found = [_logprob_suspect(base, other, rid, position, was, now)]
                groups.append((rid, tuple(s.defect for s in found)))
                found_suspects.extend(found)
                problems.append(
                    f"{rid} token {position}: log-probability {was:.4g} in {base.name}, "
                    f"{now:.4g} in {other.name} (tolerance {LOGPROB_TOLERANCE})"
                )
    suspects = tuple(dict.fromkeys(found_suspects))
    if problems:
        yield Finding(
            status="fail",
            message=f"{plural(len(set(affected)), 'greedy request')} "
            f"{'differs' if len(set(affected)) == 1 else 'differ'} with speculation: "
            + problems[0],
            runs=runs,
            requests=tuple(dict.fromkeys(affected)),
            suspects=suspects,
            diffs=tuple(diffs),
            details=tuple(problems[:MAX_DETAILS]),
            suspect_groups=tuple(g for _, g in groups) if all(g for _, g in groups) else (),
        )
        return
    with_knobs = sum(1 for info in requests if info.knobs())
    yield Finding(
        status="pass",
        message=f"{plural(len(requests), 'greedy request')} ({with_knobs} with knobs) give the "
        f"same tokens, finish reasons and log-probabilities with speculation "
        f"({', '.join(runs)})",
        runs=runs,
        requests=tuple(info.request_id for info in requests),
    )
