"""What the HTML report's figures show, computed from an audit's recorded data alone.

Each figure of ``reporting.html`` is drawn from one record of this module, and each record
comes from what a bundle holds: the findings, the distribution check's stored evidence, the
trace headers and outputs, and the trace steps where the caller has them. Nothing here runs
an engine or the oracle, so the report of a bundle read on another machine shows what the
audit's showed. Plain Python (no matplotlib, no torch): the figures' content is tested
without drawing them, and a report without matplotlib states the same numbers as tables.

- :func:`pit_histograms`: the randomized PIT values the ``distribution`` check tests (the
  same noise), binned as its uniformity sub-tests bin them, with the count each bin holds
  with 95% probability under H0, per bin and for every bin at once (Bonferroni).
- :func:`evidence_frequencies` and :func:`arm_frequencies`: token frequencies with and
  without speculation: the speculative run's tokens against the target's exact
  probabilities (the evidence's prefix cells) and a K = 0 baseline run's tokens, at the
  position (and prefix) where they differ most, with Wilson 95% intervals.
- :func:`offset_windows`: the Philox draw ranges of the requests a finding names, per
  decoding iteration, with the contract's offset where a finding's table states it and the
  events whose ranges overlap another's (same seed and subsequence) marked.
"""

from __future__ import annotations

import bisect
import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from specseed.checks.findings import Finding, OffsetRow
from specseed.distribution.analysis import pit_bins, pit_values
from specseed.distribution.evidence import DistributionEvidence, GroupEvidence, prefix_candidates
from specseed.distribution.stats import chi2_sf
from specseed.traces.records import RunTrace

LEVEL = 0.95
"""Coverage of every band and interval the figures draw."""
MAX_GROUPS = 2
"""Groups (a copied request) drawn per run: the rest are in the finding's details."""
MAX_CELLS = 12
"""Tokens drawn per frequency figure; the others are pooled into one "other" bar."""
MIN_CELL = 5.0
"""A token's expected count below this is pooled (as the chi-square tests pool it)."""
MAX_REQUESTS = 6
"""Requests drawn per offset figure."""
MAX_ITERATIONS = 16
"""Decoding iterations drawn per offset figure, from two before the first that differs."""


# -- PIT histograms ------------------------------------------------------------------------


@dataclass(frozen=True)
class PitHistogram:
    """The PIT values of one group in one order, binned, against the uniform distribution."""

    group: str
    order: str
    """``probability`` (tokens by descending probability) or ``token id``."""
    counts: tuple[int, ...]
    band: tuple[int, int]
    """The count one bin holds with probability ``LEVEL`` under H0 (uniform PIT)."""
    simultaneous: tuple[int, int]
    """The count every bin holds at once with probability at least ``LEVEL`` (Bonferroni)."""

    @property
    def n(self) -> int:
        return sum(self.counts)

    @property
    def bins(self) -> int:
        return len(self.counts)

    @property
    def expected(self) -> float:
        return self.n / self.bins

    @property
    def outside(self) -> tuple[int, ...]:
        """The bins outside the simultaneous band: where the histogram bulges or sags."""
        low, high = self.simultaneous
        return tuple(i for i, c in enumerate(self.counts) if not low <= c <= high)


def binomial_interval(n: int, p: float, level: float) -> tuple[int, int]:
    """The central interval ``[low, high]`` of Binomial(n, p) with at most ``(1 - level) / 2``
    probability on either side of it (exact, summed in log space)."""
    if n <= 0:
        return 0, 0
    tail = (1.0 - level) / 2.0
    mean, sd = n * p, math.sqrt(n * p * (1.0 - p))
    first = max(0, math.floor(mean - 12.0 * sd - 1.0))
    last = min(n, math.ceil(mean + 12.0 * sd + 1.0))
    log_p, log_q = math.log(p), math.log1p(-p)
    base = math.lgamma(n + 1)
    cdf = 0.0
    low: int | None = None
    high = last
    for k in range(first, last + 1):
        cdf += math.exp(
            base - math.lgamma(k + 1) - math.lgamma(n - k + 1) + k * log_p + (n - k) * log_q
        )
        if low is None and cdf > tail:
            low = k
        if cdf >= 1.0 - tail:
            high = k
            break
    return (low if low is not None else first), high


def _histogram(group: str, order: str, values: Sequence[float]) -> PitHistogram:
    bins = pit_bins(len(values))
    counts = [0] * bins
    for value in values:
        counts[min(int(value * bins), bins - 1)] += 1
    n = len(values)
    return PitHistogram(
        group,
        order,
        tuple(counts),
        binomial_interval(n, 1.0 / bins, LEVEL),
        binomial_interval(n, 1.0 / bins, 1.0 - (1.0 - LEVEL) / bins),
    )


def group_label(group: GroupEvidence) -> str:
    """A group as the distribution check's details name it (``hot (T=1)``)."""
    return (
        f"{group.request_ids[0].rsplit('.', 1)[0]} (T={group.temperature:g}"
        + (f", top_k={group.top_k}" if group.top_k else "")
        + (f", top_p={group.top_p:g}" if group.top_p < 1.0 else "")
        + ")"
    )


def pit_histograms(evidence: DistributionEvidence, seed_label: str) -> list[PitHistogram]:
    """Both orders' histograms of the first ``MAX_GROUPS`` groups. ``seed_label`` is the
    check's (``scenario/run``): the noise, and so every value, is the one it tested."""
    out = []
    for group in evidence.groups[:MAX_GROUPS]:
        pit, pit_id = pit_values(group, seed_label)
        label = group_label(group)
        out.append(_histogram(label, "probability", pit))
        out.append(_histogram(label, "token id", pit_id))
    return out


# -- token frequencies ---------------------------------------------------------------------


@dataclass(frozen=True)
class Arm:
    """One arm's token counts at a position: with speculation, or a K = 0 baseline."""

    name: str
    counts: tuple[int, ...]
    """Per cell of the figure (the last may be the pooled "other")."""

    @property
    def total(self) -> int:
        return sum(self.counts)

    def share(self, cell: int) -> float:
        return self.counts[cell] / self.total if self.total else 0.0

    def interval(self, cell: int) -> tuple[float, float]:
        """Wilson ``LEVEL`` interval of the cell's share."""
        return wilson(self.counts[cell], self.total, LEVEL)


@dataclass(frozen=True)
class TokenFrequencies:
    """Token frequencies at one position of one group, arm by arm."""

    group: str
    position: int
    prefix: tuple[int, ...] | None
    """The tokens before ``position`` the counted sequences share (None: every sequence,
    the marginal)."""
    cells: tuple[str, ...]
    """Token ids as text, and ``other`` for the pooled rest."""
    arms: tuple[Arm, ...]
    exact: tuple[float, ...] | None
    """The target's exact probability per cell (None: no oracle evidence)."""
    p_value: float
    """The chi-square p-value of the first arm at this position (unadjusted): why this
    position was chosen."""

    @property
    def where(self) -> str:
        if not self.prefix:  # None (the marginal), or position 0
            return f"position {self.position}"
        shown = ", ".join(str(t) for t in self.prefix[-3:])
        return f"position {self.position} after [{'…, ' if len(self.prefix) > 3 else ''}{shown}]"


def wilson(k: int, n: int, level: float) -> tuple[float, float]:
    """Wilson score interval of a proportion ``k / n``."""
    if n <= 0:
        return 0.0, 1.0
    z = _z(level)
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def _z(level: float) -> float:
    """The standard normal quantile at ``(1 + level) / 2`` (bisection on erf)."""
    target = (1.0 + level) / 2.0
    low, high = 0.0, 10.0
    for _ in range(60):
        mid = (low + high) / 2.0
        if 0.5 * (1.0 + math.erf(mid / math.sqrt(2.0))) < target:
            low = mid
        else:
            high = mid
    return (low + high) / 2.0


def _pearson_p(observed: Sequence[float], expected: Sequence[float]) -> float:
    pairs = [(o, e) for o, e in zip(observed, expected, strict=True) if e > 0]
    if len(pairs) < 2:
        return 1.0
    statistic = math.fsum((o - e) ** 2 / e for o, e in pairs)
    return chi2_sf(statistic, len(pairs) - 1)


def _next_tokens(
    sequences: Iterable[Sequence[int]], position: int, prefix: Sequence[int] | None
) -> list[int]:
    """The tokens at ``position`` of the sequences that start with ``prefix`` (None: of
    every sequence long enough)."""
    if prefix is None:
        return [s[position] for s in sequences if len(s) > position]
    want = tuple(prefix)
    return [s[position] for s in sequences if len(s) > position and tuple(s[:position]) == want]


def evidence_frequencies(
    evidence: DistributionEvidence, baseline: Mapping[tuple[object, ...], Sequence[Sequence[int]]]
) -> list[TokenFrequencies]:
    """Per group (the first ``MAX_GROUPS``): the prefix test of the evidence whose counts
    stray furthest from the target's exact probabilities, as a figure's cells: the
    speculative run's counts, the baseline's where ``baseline`` holds sequences of the same
    prompt and setup (keyed ``(prompt_ids, temperature, top_k, top_p)``), and the exact
    probabilities."""
    out = []
    for group in evidence.groups[:MAX_GROUPS]:
        candidates = prefix_candidates(group.tokens, group.length)
        best: tuple[float, int, tuple[int, ...], list[int], list[float], float] | None = None
        for (position, prefix, members), cells in zip(candidates, group.prefixes, strict=True):
            observed = Counter(group.tokens[i][position] for i in members)
            n = len(members)
            kept = [(token, p) for token, p in cells.cells if p * n >= MIN_CELL]
            rest = max(0.0, 1.0 - math.fsum(p for _, p in kept))
            counts = [float(observed[token]) for token, _ in kept]
            expected = [p * n for _, p in kept]
            counts.append(float(n - sum(counts)))
            expected.append(rest * n)
            p_value = _pearson_p(counts, expected)
            if best is None or p_value < best[0]:
                tokens = [token for token, _ in kept]
                best = (p_value, position, prefix, tokens, [p for _, p in kept] + [rest], n)
        if best is None:
            continue
        p_value, position, prefix, tokens, exact, _ = best
        tokens, exact = _fit_cells(tokens, exact)
        arms = [Arm("with speculation", _count(group.tokens, position, prefix, tokens))]
        key = (tuple(group.prompt_ids), group.temperature, group.top_k, group.top_p)
        if key in baseline:
            arms.append(
                Arm("without speculation (K = 0)", _count(baseline[key], position, prefix, tokens))
            )
        out.append(
            TokenFrequencies(
                group_label(group),
                position,
                tuple(prefix),
                (*(str(t) for t in tokens), "other"),
                tuple(arms),
                tuple(exact),
                p_value,
            )
        )
    return out


def _fit_cells(tokens: list[int], exact: list[float]) -> tuple[list[int], list[float]]:
    """At most ``MAX_CELLS`` token cells, the most probable kept; the rest joins "other"
    (the last entry of ``exact``)."""
    if len(tokens) <= MAX_CELLS:
        return tokens, exact
    order = sorted(range(len(tokens)), key=lambda i: -exact[i])[:MAX_CELLS]
    keep = sorted(order)
    pooled = exact[-1] + math.fsum(exact[i] for i in range(len(tokens)) if i not in set(keep))
    return [tokens[i] for i in keep], [exact[i] for i in keep] + [pooled]


def _count(
    sequences: Sequence[Sequence[int]],
    position: int,
    prefix: Sequence[int] | None,
    tokens: list[int],
) -> tuple[int, ...]:
    seen = Counter(_next_tokens(sequences, position, prefix))
    kept = [seen[t] for t in tokens]
    return (*kept, sum(seen.values()) - sum(kept))


def arm_frequencies(
    label: str,
    speculative: Sequence[Sequence[int]],
    baseline: Sequence[Sequence[int]],
    positions: int,
) -> TokenFrequencies | None:
    """The two arms' token counts at the first ``positions`` position where they differ most
    (smallest two-sample chi-square p-value), the most frequent tokens as cells."""
    from specseed.distribution.twosample import homogeneity

    best: tuple[float, int] | None = None
    for position in range(positions):
        left = [s[position] for s in speculative if len(s) > position]
        right = [s[position] for s in baseline if len(s) > position]
        table = homogeneity(left, right)
        if table is None:
            continue
        p_value = chi2_sf(table[0], table[1])
        if best is None or p_value < best[0]:
            best = (p_value, position)
    if best is None:
        return None
    p_value, position = best
    together = Counter(_next_tokens(speculative, position, None))
    together.update(_next_tokens(baseline, position, None))
    tokens = sorted(
        t for t, _ in sorted(together.items(), key=lambda kv: (-kv[1], kv[0]))[:MAX_CELLS]
    )
    return TokenFrequencies(
        label,
        position,
        None,
        (*(str(t) for t in tokens), "other"),
        (
            Arm("with speculation", _count(speculative, position, None, tokens)),
            Arm("without speculation (K = 0)", _count(baseline, position, None, tokens)),
        ),
        None,
        p_value,
    )


# -- offset windows ------------------------------------------------------------------------


@dataclass(frozen=True)
class Draw:
    """One sampling event's draw range: ``draws`` numbers from ``offset`` on."""

    request: str
    decoding_iter: int
    step: int
    event: str
    """``target[j]``, ``accept`` or ``draft[i]``."""
    seed: int
    subsequence: int
    offset: int
    draws: int
    expected_offset: int | None = None
    """The contract's offset, where a finding's table states it."""
    mismatch: tuple[str, ...] = ()
    """What differs from the contract (seed, subsequence, offset), where a table says."""
    overlaps: bool = False
    """Another shown event of the same seed and subsequence reads some of the same draws."""

    @property
    def kind(self) -> str:
        return self.event.split("[", 1)[0]


@dataclass(frozen=True)
class OffsetWindows:
    """The draws of a run's requests, iteration by iteration."""

    run: str
    requests: tuple[str, ...]
    draws: tuple[Draw, ...]
    """Those of the iterations shown, in step order."""
    overlapping_pairs: int
    """Pairs of the requests' events (all iterations) that read the same draws."""
    source: str
    """Where the draws come from, for the figure's caption."""
    iterations: tuple[int, int]
    """First and last decoding iteration shown."""
    more_iterations: int
    """Iterations of these requests not shown."""
    more_requests: int
    """Requests the finding names that are not shown."""


def _row_draws(rows: Iterable[OffsetRow], run: str, requests: set[str]) -> list[Draw]:
    seen: set[tuple[str, int, str]] = set()
    out = []
    for r in rows:
        key = (r.request, r.step, r.event)
        if r.run != run or r.request not in requests or key in seen:
            continue
        seen.add(key)
        out.append(
            Draw(
                r.request,
                r.decoding_iter,
                r.step,
                r.event,
                r.seed,
                r.subsequence,
                r.offset,
                r.draws,
                r.expected_offset,
                tuple(r.mismatch),
            )
        )
    return out


def _trace_draws(trace: RunTrace, requests: set[str]) -> list[Draw]:
    out = []
    for step in trace.steps:
        for row in step.rows:
            if row.phase != "scenario" or row.discarded or row.request_id not in requests:
                continue
            for event in row.events:
                label = event.kind if event.kind == "accept" else f"{event.kind}[{event.index}]"
                out.append(
                    Draw(
                        row.request_id,
                        row.decoding_iter,
                        step.step,
                        label,
                        event.seed,
                        event.subsequence,
                        event.offset,
                        event.draws,
                    )
                )
    return out


def mark_overlaps(draws: Sequence[Draw]) -> tuple[list[Draw], int]:
    """``draws`` with ``overlaps`` set on every event whose range meets another's of the same
    seed and subsequence, and how many such pairs there are. One sort and one pass per
    (seed, subsequence): a crafted trace whose events all read the same draws costs no more
    than any other."""
    groups: dict[tuple[int, int], list[int]] = defaultdict(list)
    for i, d in enumerate(draws):
        if d.draws > 0:
            groups[(d.seed, d.subsequence)].append(i)
    marked: set[int] = set()
    pairs = 0
    for members in groups.values():
        members.sort(key=lambda i: draws[i].offset)
        offsets = [draws[i].offset for i in members]
        reach = -1  # the furthest end of the ranges before this one
        for n, i in enumerate(members):
            end = draws[i].offset + draws[i].draws
            later = bisect.bisect_left(offsets, end, lo=n + 1) - (n + 1)
            pairs += later
            # Sorted by offset: a later range meets this one iff the next one does.
            if later or draws[i].offset < reach:
                marked.add(i)
            reach = max(reach, end)
    return [replace(d, overlaps=True) if i in marked else d for i, d in enumerate(draws)], pairs


def offset_windows(
    finding: Finding,
    traces: Mapping[str, RunTrace],
    tables: Sequence[OffsetRow] = (),
) -> list[OffsetWindows]:
    """One record per run of ``finding`` (at most two) whose requests drew: their events
    from the run's trace where it holds its steps, else from the offset tables of the
    scenario's findings (``tables``: ``rng-contract`` lists every event of each request that
    breaks the contract, with the contract's offset), which then also give the expected
    offsets. Requests: those the finding names (at most ``MAX_REQUESTS``)."""
    out = []
    rows = (*finding.offsets, *tables)
    for run in finding.runs[:2]:
        named = list(dict.fromkeys(finding.requests)) or list(
            dict.fromkeys(r.request for r in rows if r.run == run)
        )
        shown = named[:MAX_REQUESTS]
        wanted = set(shown)
        from_table = _row_draws(rows, run, wanted)
        trace = traces.get(run)
        if trace is not None and trace.steps:
            expected = {(d.request, d.step, d.event): d for d in from_table}
            draws = []
            for d in _trace_draws(trace, wanted):
                known = expected.get((d.request, d.step, d.event))
                draws.append(
                    replace(d, expected_offset=known.expected_offset, mismatch=known.mismatch)
                    if known is not None
                    else d
                )
            source = f"trace of run {run}"
        else:
            draws = from_table
            source = (
                f"the RNG state tables of run {run}'s findings (events of requests that "
                "follow the contract are not in them)"
            )
        if not draws:
            continue
        draws, pairs = mark_overlaps(draws)
        iterations = sorted({d.decoding_iter for d in draws})
        flagged = [d.decoding_iter for d in draws if d.overlaps or d.mismatch]
        start = max(iterations[0], (min(flagged) if flagged else iterations[0]) - 2)
        window = [i for i in iterations if i >= start][:MAX_ITERATIONS]
        kept = [d for d in draws if window[0] <= d.decoding_iter <= window[-1]]
        out.append(
            OffsetWindows(
                run,
                tuple(r for r in shown if any(d.request == r for d in kept)),
                tuple(sorted(kept, key=lambda d: (d.step, shown.index(d.request)))),
                pairs,
                source,
                (window[0], window[-1]),
                len(iterations) - len(window),
                len(named) - len(shown),
            )
        )
    return out
