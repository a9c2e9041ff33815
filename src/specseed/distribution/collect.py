"""The distribution check's evidence phase: the oracle's probabilities reduced, per sampled
token, to the numbers ``analysis`` judges (``evidence.DistributionEvidence``).

Needs torch and the oracle; everything after it is plain Python. Per group one batch of
teacher-forced logits, then every quantity vectorised over the group's tokens.

Precision. The engine samples from its own arithmetic, not from float64 exact values. Per
emitted token, an envelope ``eps`` bounds the total variation between the oracle's
distribution and one computed from the engine's logits: logits rounded to the engine's
logits dtype (unit roundoff u: 2^-24 float32, 2^-11 float16, 2^-8 bfloat16) change each
logit by at most ``delta = u * max|logit|``, so every probability moves by a factor in
``exp(+-2 delta / T)`` (TV <= 1 - exp(-2 delta / T)); float32 probability arithmetic
(softmax, the kernels' running sums) adds at most ``vocab * 2^-24``; and tokens whose
top-k/top-p membership could flip under that perturbation add their normalised mass
(``analysis`` says how the tests use it). An oracle that states a ``logits_error`` (the
float32 oracle on CUDA, TF32 off: its logits differ from the CPU forward by reduction order)
adds it to ``u``: ``delta = (u + logits_error) * max|logit|``.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from specseed.distribution.evidence import (
    MIN_CELL,
    UNIT_ROUNDOFF,
    DistributionEvidence,
    GroupEvidence,
    PrefixCells,
    Sample,
    SamplingSetup,
    judged_groups,
    prefix_candidates,
)
from specseed.distribution.oracle import ProbabilityOracle, distributions


def _envelope(
    logits: torch.Tensor,
    probs: torch.Tensor,
    setup: SamplingSetup,
    dtype: str,
    oracle_error: float = 0.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per row: the TV envelope, and which tokens' filter membership is ambiguous."""
    unit = UNIT_ROUNDOFF.get(dtype, UNIT_ROUNDOFF["bfloat16"]) + oracle_error
    vocab = logits.shape[-1]
    delta = unit * logits.abs().amax(dim=-1)
    # Probability ratios under the perturbation, widened by float32 probability rounding.
    log_ratio = 2.0 * delta / setup.temperature + 64 * 2.0**-24
    eps = -torch.expm1(-log_ratio) + vocab * 2.0**-24
    ambiguous = torch.zeros_like(probs, dtype=torch.bool)
    if (0 < setup.top_k < vocab) or setup.top_p < 1.0:
        raw = torch.softmax(logits / setup.temperature, dim=-1)
        ratio = torch.exp(2.0 * log_ratio).unsqueeze(-1)
        sorted_desc, _ = torch.sort(raw, dim=-1, descending=True)
        if 0 < setup.top_k < vocab:
            # Membership flips only where the k-th and (k+1)-th probabilities nearly tie.
            last_kept = sorted_desc[:, setup.top_k - 1 : setup.top_k]
            first_dropped = sorted_desc[:, setup.top_k : setup.top_k + 1]
            near_tie = first_dropped * ratio >= last_kept / ratio
            band = (raw >= first_dropped / ratio) & (raw <= last_kept * ratio)
            ambiguous |= band & near_tie
        if setup.top_p < 1.0:
            greater = torch.searchsorted(
                (-sorted_desc).contiguous(), (-raw).contiguous(), right=False
            )
            prefix = torch.cumsum(sorted_desc, dim=-1) - sorted_desc
            mass = torch.gather(prefix, -1, greater.clamp(max=vocab - 1))
            ambiguous |= (mass >= setup.top_p / ratio) & (mass <= setup.top_p * ratio)
        kept = (probs > 0).to(torch.float64)
        kept_mass = (raw * kept).sum(-1).clamp(min=1e-300)
        eps = eps + 2.0 * (raw * ambiguous).sum(-1) / kept_mass
    return eps.clamp(max=1.0), ambiguous


def _masses(probs: torch.Tensor, tokens: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Per row: the token's probability, the mass before it in descending-probability order
    (ties by id) and the mass of smaller ids. Masked sums: no sort of the vocabulary."""
    own = probs.gather(-1, tokens.unsqueeze(-1))
    ids = torch.arange(probs.shape[-1]).unsqueeze(0)
    lower_id = ids < tokens.unsqueeze(-1)
    ahead = (probs > own) | ((probs == own) & lower_id)
    before = (probs * ahead).sum(-1)
    before_id = (probs * lower_id).sum(-1)
    return own.squeeze(-1), before.clamp(0.0, 1.0), before_id.clamp(0.0, 1.0)


CHUNK_BYTES = 64 << 20
"""At most this much float64 logits of one group is held at once: the oracle scores the
group's requests in chunks, and only the per-token numbers (and the prefix tests' cells) are
kept, so host memory does not grow with the tokens scored (a 128k vocabulary is 1 MiB per
token)."""


def _group(
    number: int, members: Sequence[Sample], oracle: ProbabilityOracle, dtype: str
) -> GroupEvidence:
    length = min(len(s.tokens) for s in members)
    setup = members[0].setup
    rows = [s.tokens[:length] for s in members]
    oracle_error = float(getattr(oracle, "logits_error", 0.0))
    vocab = max(1, oracle.vocab_size)
    chunk = max(1, CHUNK_BYTES // (length * vocab * 8))
    candidates = prefix_candidates(rows, length)
    # The prefix tests read one request's distribution at one position: from the chunk that
    # holds that request.
    wanted: dict[int, list[int]] = {}
    for index, (_t, _prefix, rows_with) in enumerate(candidates):
        wanted.setdefault(rows_with[0], []).append(index)
    cells: list[PrefixCells | None] = [None] * len(candidates)
    own_parts: list[torch.Tensor] = []
    before_parts: list[torch.Tensor] = []
    before_id_parts: list[torch.Tensor] = []
    eps_parts: list[torch.Tensor] = []
    ambiguous: list[int] = []
    for first in range(0, len(members), chunk):
        part = members[first : first + chunk]
        part_rows = rows[first : first + chunk]
        logits = torch.stack(
            oracle.logits([(s.prompt_ids, row) for s, row in zip(part, part_rows, strict=True)])
        )
        n_req, _, width = logits.shape
        flat_logits = logits.reshape(-1, width)
        del logits
        probs = distributions(flat_logits, setup)
        eps, amb_grid = _envelope(flat_logits, probs, setup, dtype, oracle_error)
        del flat_logits
        tokens = torch.tensor(part_rows, dtype=torch.int64).reshape(-1)
        own, before, before_id = _masses(probs, tokens)
        amb = amb_grid.gather(-1, tokens.unsqueeze(-1)).squeeze(-1)
        del amb_grid
        own_parts.append(own)
        before_parts.append(before)
        before_id_parts.append(before_id)
        eps_parts.append(eps)
        offset = first * length
        ambiguous.extend(offset + i for i in torch.nonzero(amb).flatten().tolist())
        grid = probs.reshape(n_req, length, width)
        for request in range(first, first + n_req):
            for index in wanted.get(request, ()):
                t, _prefix, rows_with = candidates[index]
                row = grid[request - first, t]
                big = row * len(rows_with) >= MIN_CELL
                picked = torch.nonzero(big).flatten()
                cells[index] = PrefixCells(
                    position=t,
                    cells=tuple(zip(picked.tolist(), row[picked].tolist(), strict=True)),
                    rest=float(row[~big].sum()),
                )
        del probs, grid
    prefixes = [c for c in cells if c is not None]
    assert len(prefixes) == len(cells), "every prefix test's request lies in some chunk"
    own = torch.cat(own_parts)
    before = torch.cat(before_parts)
    before_id = torch.cat(before_id_parts)
    eps = torch.cat(eps_parts)
    return GroupEvidence(
        number=number,
        request_ids=tuple(s.request_id for s in members),
        prompt_ids=members[0].prompt_ids,
        temperature=setup.temperature,
        top_k=setup.top_k,
        top_p=setup.top_p,
        length=length,
        tokens=tuple(tuple(r) for r in rows),
        probability=tuple(own.tolist()),
        mass_before=tuple(before.tolist()),
        mass_before_id=tuple(before_id.tolist()),
        envelope=tuple(eps.tolist()),
        ambiguous=tuple(ambiguous),
        prefixes=tuple(prefixes),
    )


def collect(
    samples: Sequence[Sample], oracle: ProbabilityOracle, *, logits_dtype: str = "float32"
) -> DistributionEvidence:
    """The evidence of one run's sampled requests (``evidence.judged_groups`` of them)."""
    return DistributionEvidence(
        oracle=oracle.description,
        logits_dtype=logits_dtype,
        groups=tuple(
            _group(number, members, oracle, logits_dtype)
            for number, members in judged_groups(samples)
        ),
    )
