"""A request's logits do not depend on its batch, its row, or how its tokens were chunked.

This is the property the audit relies on to blame the RNG, not floating point, for a
divergence (numerics.py says how it is achieved). Every comparison is bitwise: ``torch.equal``
on the rows and equal fingerprints (which also tell ``-0.0`` from ``+0.0``).
"""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest
import torch

from specseed.models import numerics
from specseed.models.batch import RowPlan
from specseed.models.config import LlamaConfig
from specseed.models.draft import Eagle3DraftHead
from specseed.models.fingerprint import fingerprint
from specseed.models.numerics import attention, linear, silu
from specseed.models.target import LlamaTarget
from specseed.models.tiny import TINY_MODEL

VOCAB = TINY_MODEL.config.vocab_size


@pytest.fixture(scope="module")
def models() -> tuple[LlamaTarget, Eagle3DraftHead]:
    return TINY_MODEL.build(model_seed=11)


def prompts(count: int, seed: int) -> list[list[int]]:
    rng = random.Random(seed)
    return [[rng.randrange(VOCAB) for _ in range(rng.randrange(3, 21))] for _ in range(count)]


def assert_bitwise(a: torch.Tensor, b: torch.Tensor) -> None:
    assert a.shape == b.shape
    assert torch.equal(a, b)
    assert [fingerprint(r) for r in a] == [fingerprint(r) for r in b]


@pytest.mark.parametrize("rows", [1, 2, 3, 7, 11, 12, 33, 300])
def test_kernels_give_each_row_the_same_bits_for_any_row_count(rows: int) -> None:
    generator = torch.Generator().manual_seed(rows)
    x = torch.randn(300, 41, generator=generator)
    weight = torch.randn(97, 41, generator=generator)
    # 300 x 97 x 41 exceeds the product budget, so the 300-row call also runs in row blocks.
    reference_linear = torch.cat([linear(x[r : r + 1], weight) for r in range(300)])
    assert_bitwise(linear(x[:rows], weight), reference_linear[:rows])
    # Contiguous rows of 41: a call's last numel % 32 elements take the scalar path of
    # torch's elementwise loops; silu must not care.
    reference_silu = torch.cat([silu(x[r : r + 1]) for r in range(300)])
    assert_bitwise(silu(x[:rows].contiguous()), reference_silu[:rows])


@pytest.mark.parametrize("kernel", ["blocked", "broadcast"])
def test_linear_row_bits_ignore_batch_size_position_and_thread_count(
    kernel: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every batch size 1..40 (across the 16-row blocks), the row at every position, and
    # 1, 2 and 3 torch threads: the row's bits never move. Shapes are the tiny model's.
    monkeypatch.setattr(numerics, "LINEAR_KERNEL", kernel)
    generator = torch.Generator().manual_seed(3)
    others = torch.randn(40, 64, generator=generator)
    row = torch.randn(1, 64, generator=generator)
    weight = torch.randn(512, 64, generator=generator)
    bias = torch.randn(512, generator=generator)
    before = torch.get_num_threads()
    try:
        expected = linear(row, weight, bias)[0]
        for threads in (1, 2, 3):
            torch.set_num_threads(threads)
            for size in range(1, 41):
                for position in {0, size // 2, size - 1}:
                    batch = others[:size].clone()
                    batch[position] = row[0]
                    out = linear(batch, weight, bias)
                    assert torch.equal(out[position], expected), (threads, size, position)
    finally:
        torch.set_num_threads(before)


def test_attention_ignores_key_blocks_past_every_row() -> None:
    generator = torch.Generator().manual_seed(0)
    q = torch.randn(5, 2, 3, 8, generator=generator)
    keys = torch.randn(5, 2, 192, 8, generator=generator)
    values_t = torch.randn(5, 2, 8, 192, generator=generator)
    positions = torch.tensor([0, 3, 40, 63, 17])
    slots = torch.arange(192)
    short = attention(q, keys[:, :, :64], values_t[..., :64], slots[:64] > positions[:, None], 0.35)
    # Whatever sits in the extra blocks is masked and must change nothing, not even a bit.
    keys[:, :, 64:] *= 1e30
    values_t[..., 64:] *= -1e30
    long = attention(q, keys, values_t, slots > positions[:, None], 0.35)
    assert_bitwise(short, long)


def target_alone(target: LlamaTarget, tokens: list[int], decode: list[int]) -> torch.Tensor:
    cache = target.new_cache()
    rows = [target.forward([(cache, tokens)])[0].logits]
    rows += [target.forward([(cache, [t])])[0].logits for t in decode]
    return torch.cat(rows)


@pytest.mark.parametrize("row", [0, 1, 13, 40, 63])
def test_target_request_alone_equals_it_in_a_batch_of_64_at_any_row(
    models: tuple[LlamaTarget, Eagle3DraftHead], row: int
) -> None:
    target, _ = models
    others = prompts(63, seed=row)
    others[7] = others[7] * 10  # a long neighbour: the batch attends over more key blocks
    mine, decode = [7, 300, 12, 12, 499, 3, 88], [5, 41, 260]
    batch = [*others[:row], mine, *others[row:]]
    caches = [target.new_cache() for _ in batch]

    # A whole-prefill step for all 64 requests (1300-odd rows: the projections run in row
    # blocks), then decode steps of one token each, and one K + 1 = 4 chunk.
    steps = [target.forward(list(zip(caches, batch, strict=True)))[row].logits]
    for token in decode:
        steps.append(target.forward([(c, [token]) for c in caches])[row].logits)
    chunk = [9, 10, 11, 12]
    steps.append(target.forward([(c, chunk) for c in caches])[row].logits)

    assert_bitwise(torch.cat(steps), target_alone(target, mine, decode + chunk))


@pytest.mark.parametrize("sizes", [[4, 5, 4, 5, 5], [18, 20, 19, 20, 17], [2, 1, 2, 2]])
def test_unequal_chunks_padded_to_the_longest_keep_each_requests_bits(
    models: tuple[LlamaTarget, Eagle3DraftHead], sizes: list[int]
) -> None:
    # Chunks of nearly one size attend as chunks padded to the longest (each cache gathered
    # once); every request's rows must equal the request served alone.
    target, _ = models
    rng = random.Random(len(sizes))
    prefixes = prompts(len(sizes), seed=sum(sizes))
    chunks = [[rng.randrange(VOCAB) for _ in range(size)] for size in sizes]
    caches = [target.new_cache() for _ in sizes]
    target.forward(list(zip(caches, prefixes, strict=True)))
    plan = RowPlan.build(
        list(zip(caches, chunks, strict=True)), pool=caches[0].pool, vocab_size=VOCAB, owner="t"
    )
    assert plan.layout.padded_rows is not None and plan.layout.chunk_rows == max(sizes)
    batched = target.forward(list(zip(caches, chunks, strict=True)))
    for number, (prefix, chunk) in enumerate(zip(prefixes, chunks, strict=True)):
        cache = target.new_cache()
        target.forward([(cache, prefix)])
        alone = target.forward([(cache, chunk)])[0]
        assert_bitwise(batched[number].logits, alone.logits)
        assert_bitwise(batched[number].aux_hidden, alone.aux_hidden)


ODD_SHAPES = LlamaConfig(
    vocab_size=83,
    hidden_size=24,
    intermediate_size=41,  # silu over rows of 41: most elements sit in a vector tail somewhere
    num_hidden_layers=3,
    num_attention_heads=3,
    num_key_value_heads=1,
    head_dim=10,
    attention_bias=True,
    mlp_bias=True,
    tie_word_embeddings=True,
    max_position_embeddings=200,
)


@pytest.mark.parametrize("row", [0, 5, 63])
def test_odd_shapes_are_batch_invariant_too(row: int) -> None:
    target = LlamaTarget.random(ODD_SHAPES, model_seed=2)
    rng = random.Random(row)
    batch = [[rng.randrange(83) for _ in range(rng.randrange(1, 9))] for _ in range(64)]
    batch[(row + 1) % 64] = [rng.randrange(83) for _ in range(150)]
    caches = [target.new_cache() for _ in batch]
    batched = target.forward(list(zip(caches, batch, strict=True)))[row]
    alone = target.forward([(target.new_cache(), batch[row])])[0]
    assert_bitwise(batched.logits, alone.logits)
    assert_bitwise(batched.aux_hidden, alone.aux_hidden)


def chunkings(length: int, seed: int) -> Iterator[list[int]]:
    yield [length]  # one prefill
    yield [1] * length  # token by token
    yield [4] * (length // 4) + ([length % 4] if length % 4 else [])  # K + 1 = 4 at a time
    rng = random.Random(seed)
    sizes: list[int] = []
    while sum(sizes) < length:
        sizes.append(min(rng.choice([1, 2, 3, 4, 7]), length - sum(sizes)))
    yield sizes


def test_target_chunking_does_not_change_bits(models: tuple[LlamaTarget, Eagle3DraftHead]) -> None:
    target, _ = models
    tokens = prompts(1, seed=99)[0] * 3
    results = []
    for sizes in chunkings(len(tokens), seed=1):
        cache, start, rows = target.new_cache(), 0, []
        for size in sizes:
            out = target.forward([(cache, tokens[start : start + size])])[0]
            rows.append(torch.cat((out.logits, out.aux_hidden), dim=-1))
            start += size
        results.append(torch.cat(rows))
    for other in results[1:]:
        assert_bitwise(other, results[0])


def test_target_result_does_not_depend_on_thread_count(
    models: tuple[LlamaTarget, Eagle3DraftHead],
) -> None:
    target, _ = models
    batch = prompts(16, seed=5)
    before = torch.get_num_threads()
    results = []
    try:
        for threads in (1, max(2, before)):
            torch.set_num_threads(threads)
            caches = [target.new_cache() for _ in batch]
            outs = target.forward(list(zip(caches, batch, strict=True)))
            results.append(torch.cat([o.logits for o in outs]))
    finally:
        torch.set_num_threads(before)
    assert_bitwise(results[0], results[1])


def test_truncated_positions_leave_no_trace(models: tuple[LlamaTarget, Eagle3DraftHead]) -> None:
    target, _ = models
    prefix, rejected, accepted = [4, 8, 15, 16], [23, 42, 108, 7], [23, 300]
    cache = target.new_cache()
    target.forward([(cache, prefix)])
    target.forward([(cache, rejected)])
    cache.truncate(len(prefix) + 1)  # keep the first draft, drop the rest
    after = target.forward([(cache, accepted[1:])])[0].logits

    fresh = target.new_cache()
    expected = target.forward([(fresh, prefix + accepted)])[0].logits[-1:]
    assert_bitwise(after, expected)


def test_forked_caches_continue_as_the_whole_sequence_would(
    models: tuple[LlamaTarget, Eagle3DraftHead],
) -> None:
    # A shared prefix computed once and copied (forks), then each sequence goes on from its
    # copy: the bits of one forward of each whole sequence, whatever the pool did meanwhile.
    target, _ = models
    prefix = [4, 8, 15, 16, 23]
    tails = [[42, 108], [7], [300, 301, 302, 5]]
    shared = target.new_cache()
    target.forward([(shared, prefix)])
    forks = shared.forks(len(tails) + 40)  # more caches than the pool holds: it grows first
    assert all(f.length == len(prefix) and f.slot != shared.slot for f in forks)
    shared.release()
    outs = target.forward(list(zip(forks, tails, strict=False)))
    for tail, out in zip(tails, outs, strict=True):
        whole = target.forward([(target.new_cache(), prefix + tail)])[0].logits
        assert_bitwise(out.logits, whole[len(prefix) :])


def test_reused_and_grown_pool_slots_do_not_change_bits(
    models: tuple[LlamaTarget, Eagle3DraftHead],
) -> None:
    target, _ = models
    tokens = [1, 2, 3, 4, 5]
    first = target.new_cache()
    expected = target.forward([(first, tokens)])[0].logits
    slot = first.slot
    first.release()
    reused = target.new_cache()
    assert reused.slot == slot  # the released slot, still holding the old keys until zeroed
    assert_bitwise(target.forward([(reused, tokens)])[0].logits, expected)

    many = [target.new_cache() for _ in range(40)]  # forces the pool to grow
    outs = target.forward([(c, tokens) for c in many])
    for out in outs:
        assert_bitwise(out.logits, expected)


def test_a_reused_slot_forgets_what_its_previous_owner_stored(
    models: tuple[LlamaTarget, Eagle3DraftHead],
) -> None:
    # A previous owner wrote 40 positions, then left infinities in them (a model whose
    # activations overflowed does): the next owner of the slot attends over masked key
    # slots, where anything but a finite value would turn 0 * x into NaN. Only the written
    # positions are zeroed on reuse; they must all be.
    target, _ = models
    tokens = [1, 2, 3, 4, 5]
    expected = target.forward([(target.new_cache(), tokens)])[0].logits
    first = target.new_cache()
    target.forward([(first, list(range(10, 50)))])
    pool = target._pool
    pool.keys[:, first.slot, :, :40] = float("inf")
    pool.values[:, first.slot, :, :, :40] = float("inf")
    slot = first.slot
    first.release()
    reused = target.new_cache()
    assert reused.slot == slot
    assert_bitwise(target.forward([(reused, tokens)])[0].logits, expected)


def test_reserved_slots_keep_live_caches_and_start_at_zero(
    models: tuple[LlamaTarget, Eagle3DraftHead],
) -> None:
    target, _ = models
    tokens = [7, 8, 9]
    live = target.new_cache()
    target.forward([(live, tokens)])
    before = target._pool.num_slots
    target.reserve_caches(before + 100)
    assert target._pool.num_slots == before + 100
    target.reserve_caches(8)  # never shrinks
    assert target._pool.num_slots == before + 100
    more = target.forward([(live, [10])])[0].logits
    expected = target.forward([(target.new_cache(), [*tokens, 10])])[0].logits[-1:]
    assert_bitwise(more, expected)
    caches = [target.new_cache() for _ in range(100)]  # within the room reserved
    assert target._pool.num_slots == before + 100
    assert len({c.slot for c in caches} | {live.slot}) == len(caches) + 1


# -- draft head ------------------------------------------------------------------------


def draft_inputs(target: LlamaTarget, tokens: list[int]) -> torch.Tensor:
    """Captured target states at each position (what the first draft step consumes)."""
    return target.forward([(target.new_cache(), tokens)])[0].aux_hidden


def draft_alone(
    draft: Eagle3DraftHead, tokens: list[int], aux: torch.Tensor, followups: list[int]
) -> torch.Tensor:
    """First step over the prompt, then later steps feeding back hidden_out."""
    cache = draft.new_cache()
    out = draft.forward([(cache, tokens, aux)])[0]
    rows = [out.logits]
    hidden = out.hidden_out[-1:]
    for token in followups:
        out = draft.forward([(cache, [token], hidden)])[0]
        rows.append(out.logits)
        hidden = out.hidden_out
    return torch.cat(rows)


@pytest.mark.parametrize("row", [0, 31, 63])
def test_draft_request_alone_equals_it_in_a_batch_of_64_at_any_row(
    models: tuple[LlamaTarget, Eagle3DraftHead], row: int
) -> None:
    target, draft = models
    batch = prompts(64, seed=100 + row)
    batch[row ^ 1] = batch[row ^ 1] * 10  # a long neighbour: more key blocks in the batch
    auxes = [draft_inputs(target, p) for p in batch]
    followups = [17, 301, 5]
    caches = [draft.new_cache() for _ in batch]

    outs = draft.forward(list(zip(caches, batch, auxes, strict=True)))
    rows = [outs[row].logits]
    hiddens = [o.hidden_out[-1:] for o in outs]
    for token in followups:
        outs = draft.forward([(c, [token], h) for c, h in zip(caches, hiddens, strict=True)])
        rows.append(outs[row].logits)
        hiddens = [o.hidden_out for o in outs]

    assert_bitwise(torch.cat(rows), draft_alone(draft, batch[row], auxes[row], followups))


def test_draft_chunking_does_not_change_bits(models: tuple[LlamaTarget, Eagle3DraftHead]) -> None:
    target, draft = models
    tokens = prompts(1, seed=7)[0] * 2
    aux = draft_inputs(target, tokens)
    results = []
    for sizes in chunkings(len(tokens), seed=2):
        cache, start, rows = draft.new_cache(), 0, []
        for size in sizes:
            out = draft.forward([(cache, tokens[start : start + size], aux[start : start + size])])[
                0
            ]
            rows.append(torch.cat((out.logits, out.hidden_out), dim=-1))
            start += size
        results.append(torch.cat(rows))
    for other in results[1:]:
        assert_bitwise(other, results[0])


def test_draft_batch_mixing_first_and_later_steps_equals_separate_calls(
    models: tuple[LlamaTarget, Eagle3DraftHead],
) -> None:
    target, draft = models
    first_tokens, later_tokens = [3, 9, 27, 81], [5, 25, 125]
    aux = draft_inputs(target, first_tokens)
    warm = draft.new_cache()
    hidden = draft.forward([(warm, later_tokens, draft_inputs(target, later_tokens))])[0].hidden_out

    alone_first = draft.forward([(draft.new_cache(), first_tokens, aux)])[0]
    alone_warm = draft.new_cache()
    draft.forward([(alone_warm, later_tokens, draft_inputs(target, later_tokens))])
    alone_later = draft.forward([(alone_warm, [7], hidden[-1:])])[0]

    mixed = draft.forward([(warm, [7], hidden[-1:]), (draft.new_cache(), first_tokens, aux)])
    assert_bitwise(mixed[0].logits, alone_later.logits)
    assert_bitwise(mixed[1].logits, alone_first.logits)
    assert_bitwise(mixed[1].hidden_out, alone_first.hidden_out)
