"""A pure-Python speculative sampler on a known target, for calibrating the statistics.

It draws tokens the way the accept kernel does (chain speculative sampling, inverse CDF in
token-id order: accept test ``i`` with draw ``i``, the bonus with draw ``K``, a residual
after a rejection with draw ``K + 1``; each draft step one draw) from a first-order Markov
target and draft (``target[previous]`` is the next token's distribution), and records each
step as an engine's trace does (``RowRecord``s with their sampling events). Draws are keyed
by offset in one stream per request, laid out either with slots one draw wide
(``trtllm-pr17599``'s layout: accept at ``base``, draft step ``i`` at ``base + 1 + i``, a
window of ``K + 1``) or in disjoint slots (``ideal``). ``share=False`` gives every event
fresh draws whatever the offsets say: the trace then shows overlaps that couple nothing,
which is how the step-aware tests' shared classes are calibrated under H0.

Speculative sampling is lossless, so with independent draws the emitted tokens follow the
target exactly; with shared draws they do not (the coupling ``trtllm-pr17599`` creates).
No torch: the benchmark and the tests run it for thousands of requests.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from specseed.traces.records import RowRecord, SamplingEvent

Layout = Literal["one-draw-slots", "disjoint"]
_WIDE = 1024


def inverse_cdf(probs: Sequence[float], u: float) -> int:
    """The first token (id order) whose cumulative probability exceeds ``u * total``."""
    total = sum(probs)
    running = 0.0
    target = u * total
    last = 0
    for token, p in enumerate(probs):
        if p <= 0.0:
            continue
        last = token
        running += p
        if running > target:
            return token
    return last


@dataclass
class _Stream:
    rng: random.Random
    share: bool
    values: dict[int, float]

    def read(self, offset: int, count: int) -> list[float]:
        if not self.share:
            return [self.rng.random() for _ in range(count)]
        out = []
        for o in range(offset, offset + count):
            if o not in self.values:
                self.values[o] = self.rng.random()
            out.append(self.values[o])
        return out


def _event(kind: str, index: int, seed: int, offset: int, draws: int) -> SamplingEvent:
    return SamplingEvent(
        kind=kind,  # type: ignore[arg-type]
        index=index,
        kernel="simulated",
        kernel_row=0,
        seed=seed,
        subsequence=0,
        offset=offset,
        draws=draws,
    )


def speculative_request(
    target: Sequence[Sequence[float]],
    draft: Sequence[Sequence[float]],
    *,
    request_id: str,
    start: int,
    length: int,
    k: int,
    rng: random.Random,
    layout: Layout = "disjoint",
    share: bool = True,
) -> tuple[tuple[int, ...], tuple[RowRecord, ...]]:
    """Serve one request of ``length`` tokens after token ``start``: its tokens and rows."""
    seed = rng.getrandbits(32)
    stream = _Stream(rng, share, {})
    one_draw = layout == "one-draw-slots"
    window = k + 1 if one_draw else (2 * k + 2) * _WIDE

    def draft_offset(base: int, i: int) -> int:
        return base + 1 + i if one_draw else base + (k + 2 + i) * _WIDE

    tokens: list[int] = []
    rows: list[RowRecord] = []
    iteration = 0
    drafts: list[int] = []
    previous = start
    while len(tokens) < length:
        base = iteration * window
        events: list[SamplingEvent] = []
        verified = tuple(drafts)
        if not drafts:
            (u,) = stream.read(base, 1)
            emitted = [inverse_cdf(target[previous], u)]
            events.append(_event("target", 0, seed, base, 1))
        else:
            uniforms = stream.read(base, k + 2)
            emitted = []
            context = previous
            rejected_at = None
            for i, d in enumerate(drafts):
                q, p = target[context][d], draft[context][d]
                if uniforms[i] * p < q:
                    emitted.append(d)
                    context = d
                else:
                    rejected_at = i
                    break
            if rejected_at is None:
                draws = k + 1
                emitted.append(inverse_cdf(target[context], uniforms[k]))
            else:
                draws = k + 2
                residual = [
                    max(0.0, q - p) for q, p in zip(target[context], draft[context], strict=True)
                ]
                emitted.append(inverse_cdf(residual, uniforms[k + 1]))
            events.append(_event("accept", 0, seed, base, draws))
        emitted = emitted[: length - len(tokens)]
        first = len(tokens)
        tokens.extend(emitted)
        previous = tokens[-1]
        drafts = []
        if len(tokens) < length:
            context = previous
            for i in range(k):
                offset = draft_offset(base, i)
                (u,) = stream.read(offset, 1)
                token = inverse_cdf(draft[context], u)
                drafts.append(token)
                events.append(_event("draft", i, seed, offset, 1))
                context = token
        rows.append(
            RowRecord(
                request_id=request_id,
                row=0,
                slot=0,
                phase="scenario",
                decoding_iter=iteration,
                drafts_verified=verified,
                accepted=len(emitted) - 1 if verified else 0,
                emitted=tuple(emitted),
                first_position=first,
                logits_fingerprints=(),
                drafts_proposed=tuple(drafts),
                events=tuple(events),
            )
        )
        iteration += 1
    return tuple(tokens), tuple(rows)


def id_order_pit(probs: Sequence[float], token: int, v: float) -> float:
    """Randomized PIT of ``token`` under ``probs`` with tokens in id order."""
    total = sum(probs)
    before = sum(probs[:token]) / total
    return min(1.0 - 1e-12, before + v * probs[token] / total)


def markov_tables(
    vocab: int, rng: random.Random, *, draft_weight: float = 0.5
) -> tuple[list[list[float]], list[list[float]]]:
    """A random first-order Markov target and a draft that mixes it with another random
    table (``draft_weight`` of the other: acceptance near 1 - draft_weight)."""

    def table() -> list[list[float]]:
        rows = []
        for _ in range(vocab):
            weights = [math.exp(1.5 * rng.gauss(0.0, 1.0)) for _ in range(vocab)]
            total = sum(weights)
            rows.append([w / total for w in weights])
        return rows

    target, other = table(), table()
    draft = [
        [(1.0 - draft_weight) * q + draft_weight * o for q, o in zip(tq, to, strict=True)]
        for tq, to in zip(target, other, strict=True)
    ]
    return target, draft


def simulate_group(
    target: Sequence[Sequence[float]],
    draft: Sequence[Sequence[float]],
    *,
    requests: int,
    length: int,
    k: int,
    rng: random.Random,
    layout: Layout = "disjoint",
    share: bool = True,
    start: int = 3,
) -> tuple[list[tuple[int, ...]], list[list[float]], list[tuple[RowRecord, ...]]]:
    """``requests`` copies of one request: their tokens, the id-order PIT of each token under
    the target (randomized with ``rng``), and their rows."""
    all_tokens, pits, structures = [], [], []
    for i in range(requests):
        tokens, rows = speculative_request(
            target,
            draft,
            request_id=f"s.{i}",
            start=start,
            length=length,
            k=k,
            rng=rng,
            layout=layout,
            share=share,
        )
        previous = [start, *tokens[:-1]]
        pits.append(
            [
                id_order_pit(target[p], t, rng.random())
                for p, t in zip(previous, tokens, strict=True)
            ]
        )
        all_tokens.append(tokens)
        structures.append(rows)
    return all_tokens, pits, structures
