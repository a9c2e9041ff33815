"""The flashinfer tap on the CPU, over a stand-in ``flashinfer.sampling`` made of the twins.

The GPU half (the real module, the reference engine's flashinfer backend, CUDA graph capture)
is in ``test_flashinfer_tap_gpu.py``.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable, Iterator
from types import ModuleType

import pytest
import torch

from specseed import sampling
from specseed.taps.flashinfer_tap import FlashinferTap, reads_element0_only
from tests.taps import standin_flashinfer
from tests.taps.copy_count import copies

UINT64 = (1 << 64) - 1


@pytest.fixture
def fs() -> Iterator[ModuleType]:
    module = standin_flashinfer.make("0.7.4")
    yield module
    standin_flashinfer.drop()


def _probs(rows: int, vocab: int = 32, seed: int = 0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    p = torch.rand(rows, vocab, generator=gen)
    return p / p.sum(-1, keepdim=True)


def test_records_per_row_seed_offset_subsequence_draws_and_tokens(fs: ModuleType) -> None:
    probs = _probs(4)
    seeds = torch.tensor([7, -1, 123, 1 << 40], dtype=torch.int64)
    offsets = torch.tensor([0, 4, 8, 1024], dtype=torch.int64)
    with FlashinferTap(fs) as tap:
        tokens = fs.sampling_from_probs(probs, seed=seeds, offset=offsets)
    assert len(tap.calls) == 1
    call = tap.calls[0]
    assert (call.function, call.seed_kind, call.seed_length) == ("sampling_from_probs", "tensor", 4)
    assert call.flashinfer_version == "0.7.4" and not call.element0
    assert [r.row for r in call.rows] == [r.subsequence for r in call.rows] == [0, 1, 2, 3]
    assert [r.seed for r in call.rows] == [7, UINT64, 123, 1 << 40]
    assert [r.offset for r in call.rows] == [0, 4, 8, 1024]
    assert [r.draws for r in call.rows] == [1, 1, 1, 1]
    assert [r.tokens for r in call.rows] == [(int(t),) for t in tokens.tolist()]


def test_sees_calls_through_names_imported_before_installation(fs: ModuleType) -> None:
    importer = ModuleType("standin_flashinfer_pkg_importer")
    importer.sampling_from_probs = fs.sampling_from_probs  # type: ignore[attr-defined]
    sys.modules[importer.__name__] = importer
    original = fs.sampling_from_probs
    tap = FlashinferTap(fs).install()
    try:
        assert importer.sampling_from_probs is not original  # type: ignore[attr-defined]
        importer.sampling_from_probs(_probs(2), seed=3, offset=0)  # type: ignore[attr-defined]
        assert "standin_flashinfer_pkg_importer.sampling_from_probs" in tap.aliases_patched
    finally:
        tap.uninstall()
    assert len(tap.calls) == 1 and tap.calls[0].seed_kind == "scalar"
    assert importer.sampling_from_probs is original  # type: ignore[attr-defined]
    assert fs.sampling_from_probs is original


def test_without_the_alias_search_such_a_call_is_missed(fs: ModuleType) -> None:
    """What the search in sys.modules is for: patching the module attribute alone misses it."""
    held = fs.sampling_from_probs
    tap = FlashinferTap(fs)
    wrapper = tap._wrap("sampling_from_probs", held)
    fs.sampling_from_probs = wrapper
    try:
        held(_probs(2), seed=3, offset=0)
    finally:
        fs.sampling_from_probs = held
    assert tap.calls == []


@pytest.mark.parametrize("draft_seed", range(6))
def test_chain_draws_follow_the_emitted_counts(fs: ModuleType, draft_seed: int) -> None:
    batch, k, vocab = 6, 3, 16
    gen = torch.Generator().manual_seed(draft_seed)
    draft = torch.softmax(torch.randn(batch, k, vocab, generator=gen) * 3, -1)
    target = torch.softmax(torch.randn(batch, k + 1, vocab, generator=gen) * 3, -1)
    ids = torch.multinomial(draft.reshape(-1, vocab), 1, generator=gen).reshape(batch, k).int()
    seeds = torch.arange(batch, dtype=torch.int64) + 100
    offsets = torch.zeros(batch, dtype=torch.int64)
    # Counts flashinfer adds to: the tap must subtract what was there before the call.
    emitted_in = torch.full((batch,), 5, dtype=torch.int32)
    with FlashinferTap(fs) as tap:
        out, _acc, emitted = fs.chain_speculative_sampling(
            draft,
            ids,
            target,
            maybe_output_emitted_draft_token_num=emitted_in,
            seed=seeds,
            offset=offsets,
        )
    *_, twin_draws = sampling.chain_speculative_sampling(
        draft, ids, target, seed=seeds, offset=offsets, return_draws=True
    )
    rows = tap.calls[0].rows
    assert [r.draws for r in rows] == twin_draws.tolist()
    emitted_now = (emitted - 5).tolist()
    assert [r.tokens for r in rows] == [
        tuple(out[i, : emitted_now[i] + 1].tolist()) for i in range(batch)
    ]


def test_top_k_and_top_p_draws_are_unknown_not_guessed(fs: ModuleType) -> None:
    with FlashinferTap(fs) as tap:
        fs.top_k_top_p_sampling_from_probs(_probs(3), 5, 0.9, seed=1, offset=0)
        fs.top_p_sampling_from_probs(_probs(3), 0.5, seed=1, offset=0)
        fs.top_k_sampling_from_probs(_probs(3), 4, seed=1, offset=0)
    assert all(row.draws is None for _, row in tap.rows())
    assert len(list(tap.rows())) == 9


def test_element0_releases_record_the_seed_the_kernel_used() -> None:
    fs = standin_flashinfer.make("0.6.4")
    try:
        with FlashinferTap(fs) as tap:
            fs.sampling_from_probs(
                _probs(3),
                seed=torch.tensor([5, 6, 7], dtype=torch.int64),
                offset=torch.tensor([0, 4, 8], dtype=torch.int64),
            )
    finally:
        standin_flashinfer.drop()
    call = tap.calls[0]
    assert call.element0 and call.flashinfer_version == "0.6.4"
    assert [r.seed for r in call.rows] == [5, 5, 5]
    assert [r.seed_given for r in call.rows] == [5, 6, 7]
    assert [r.offset for r in call.rows] == [0, 0, 0]


def test_a_length_one_tensor_is_broadcast(fs: ModuleType) -> None:
    with FlashinferTap(fs) as tap:
        fs.sampling_from_probs(
            _probs(3),
            seed=torch.tensor([9], dtype=torch.int64),
            offset=torch.tensor([4], dtype=torch.int64),
        )
    assert [(r.seed, r.offset) for r in tap.calls[0].rows] == [(9, 4)] * 3


@pytest.mark.parametrize(
    ("version", "element0"),
    [
        ("0.6.3", False),
        ("0.6.4", True),
        ("0.7.1", True),
        ("0.7.1.post2", True),
        ("0.7.2", False),
        ("0.7.4", False),
        ("0.7.4+cu130", False),
        (None, False),
    ],
)
def test_which_releases_read_element0(version: str | None, element0: bool) -> None:
    assert reads_element0_only(version) is element0


def test_uninstall_restores_every_function(fs: ModuleType) -> None:
    before = {name: getattr(fs, name) for name in standin_flashinfer.NAMES}
    tap = FlashinferTap(fs).install()
    assert all(getattr(fs, name) is not before[name] for name in before)
    tap.uninstall()
    assert all(getattr(fs, name) is before[name] for name in before)
    assert tap.blind_spots() == [] or all("torch.compile" in n for n in tap.blind_spots())


def test_torch_compile_in_the_process_is_named_as_a_blind_spot(fs: ModuleType) -> None:
    """Graphs compiled before the tap call the kernels directly; the tap can only say that
    compilation happened."""
    tap = FlashinferTap(fs)
    compiled = torch.compile(lambda x: x * 2 + 1, backend="eager")
    compiled(torch.ones(3))
    assert any("torch.compile" in note for note in tap.blind_spots())


def test_a_nested_tapped_call_keeps_its_own_rows(fs: ModuleType) -> None:
    """A tapped function that calls another tapped one through the module (as flashinfer's
    joint kernels call their parts): the inner call returns first and is recorded first,
    each with its own rows, however late the rows are copied."""
    inner_probs, outer_probs = _probs(2, seed=1), _probs(5, seed=2)
    inner_seeds = torch.tensor([11, 12], dtype=torch.int64)
    outer = fs.top_k_top_p_sampling_from_probs

    def joint(probs: torch.Tensor, top_k: object, top_p: object, **kwargs: object) -> object:
        fs.sampling_from_probs(inner_probs, seed=inner_seeds, offset=inner_seeds * 0)
        return outer(probs, top_k, top_p, **kwargs)

    fs.top_k_top_p_sampling_from_probs = joint  # type: ignore[attr-defined]
    with FlashinferTap(fs) as tap:
        fs.sampling_from_probs(_probs(3), seed=1, offset=0)
        fs.top_k_top_p_sampling_from_probs(outer_probs, 4, 0.9, seed=99, offset=8)
    calls = tap.calls
    assert [(c.index, c.function, len(c.rows)) for c in calls] == [
        (0, "sampling_from_probs", 3),
        (1, "sampling_from_probs", 2),
        (2, "top_k_top_p_sampling_from_probs", 5),
    ]
    assert [r.seed for r in calls[1].rows] == [11, 12]
    assert {(r.seed, r.offset) for r in calls[2].rows} == {(99, 8)}


def test_buffers_the_caller_reuses_are_recorded_as_they_were_at_the_call(
    fs: ModuleType,
) -> None:
    """The tap copies the rows late: what it reads must be the call's state, not what the
    engine wrote into the same tensors afterwards."""
    batch, k, vocab = 4, 2, 16
    gen = torch.Generator().manual_seed(9)
    draft = torch.softmax(torch.randn(batch, k, vocab, generator=gen), -1)
    target = torch.softmax(torch.randn(batch, k + 1, vocab, generator=gen), -1)
    ids = torch.multinomial(draft.reshape(-1, vocab), 1, generator=gen).reshape(batch, k).int()
    seeds = torch.tensor([1, 2, 3, 4], dtype=torch.int64)
    offsets = torch.tensor([0, 4, 8, 12], dtype=torch.int64)
    emitted_buffer = torch.zeros(batch, dtype=torch.int32)
    with FlashinferTap(fs) as tap:
        tokens = fs.sampling_from_probs(_probs(4), seed=seeds, offset=offsets)
        sampled = tokens.tolist()
        out, _acc, emitted = fs.chain_speculative_sampling(
            draft,
            ids,
            target,
            maybe_output_emitted_draft_token_num=emitted_buffer,
            seed=seeds,
            offset=offsets,
        )
        chain_rows = [tuple(out[i, : int(emitted[i]) + 1].tolist()) for i in range(batch)]
        # What an engine does next: advance the offsets, reuse the output buffers.
        seeds.add_(100)
        offsets.add_(4)
        tokens.fill_(-1)
        out.fill_(-1)
        emitted.fill_(0)
    first, chain = tap.calls
    assert [r.seed for r in first.rows] == [1, 2, 3, 4]
    assert [r.offset for r in first.rows] == [0, 4, 8, 12]
    assert [r.tokens for r in first.rows] == [(t,) for t in sampled]
    assert [r.offset for r in chain.rows] == [0, 4, 8, 12]
    assert [r.tokens for r in chain.rows] == chain_rows


def test_reads_between_calls_and_a_cleared_list(fs: ModuleType) -> None:
    """Each read copies only what came since the last; clearing starts the indices again
    (the TensorRT-LLM adapter clears the list between phases)."""
    with FlashinferTap(fs) as tap:
        fs.sampling_from_probs(_probs(2), seed=torch.tensor([5, 6]), offset=torch.tensor([0, 0]))
        assert [r.seed for r in tap.calls[0].rows] == [5, 6]
        fs.sampling_from_probs(_probs(3), seed=7, offset=4)
        assert [len(c.rows) for c in tap.calls] == [2, 3]
        tap.calls.clear()
        fs.sampling_from_probs(_probs(1), seed=8, offset=0)
    assert [(c.index, c.rows[0].seed) for c in tap.calls] == [(0, 8)]
    as_data = dataclasses.asdict(tap.calls[0])["columns"]
    assert as_data["seeds"] == [8] and as_data["draws"] == [1]


def test_a_tapped_call_makes_one_copy_before_the_kernel_and_one_after(fs: ModuleType) -> None:
    """Chain sampling into a buffer the caller passed: the seeds, offsets and the counts as
    they were go in one copy, the tokens and the counts as they are after in another (four
    separate copies before)."""
    batch, k, vocab = 4, 3, 16
    gen = torch.Generator().manual_seed(5)
    draft = torch.softmax(torch.randn(batch, k, vocab, generator=gen), -1)
    target = torch.softmax(torch.randn(batch, k + 1, vocab, generator=gen), -1)
    ids = torch.multinomial(draft.reshape(-1, vocab), 1, generator=gen).reshape(batch, k).int()
    seeds = torch.arange(batch, dtype=torch.int64)
    original = fs.chain_speculative_sampling

    def chain(function: Callable[..., object]) -> Callable[[], object]:
        return lambda: function(
            draft,
            ids,
            target,
            maybe_output_emitted_draft_token_num=torch.zeros(batch, dtype=torch.int32),
            seed=seeds,
            offset=seeds * 4,
        )

    untapped = copies(chain(original))
    with FlashinferTap(fs) as tap:
        tapped = copies(chain(fs.chain_speculative_sampling))
    assert tapped - untapped == 2
    assert [r.seed for r in tap.calls[0].rows] == [0, 1, 2, 3]


def test_calls_of_odd_sizes_read_back_from_one_host_copy(fs: ModuleType) -> None:
    """Every call's bytes sit side by side in one chunk, so an int64 seed can follow an odd
    number of int32 tokens: each call reads back its own values."""
    batch, k, vocab = 3, 2, 16
    gen = torch.Generator().manual_seed(11)
    draft = torch.softmax(torch.randn(batch, k, vocab, generator=gen), -1)
    target = torch.softmax(torch.randn(batch, k + 1, vocab, generator=gen), -1)
    ids = torch.multinomial(draft.reshape(-1, vocab), 1, generator=gen).reshape(batch, k).int()
    expected = []
    with FlashinferTap(fs) as tap:
        for rows in (3, 5, 1):
            seeds = torch.arange(rows, dtype=torch.int64) + 10 * rows
            tokens = fs.sampling_from_probs(_probs(rows, seed=rows), seed=seeds, offset=seeds + 1)
            expected.append(([10 * rows + i for i in range(rows)], [(t,) for t in tokens.tolist()]))
        seeds = torch.tensor([7, 8, 9], dtype=torch.int64)
        out, _acc, emitted = fs.chain_speculative_sampling(
            draft, ids, target, seed=seeds, offset=seeds * 0
        )
        chain_tokens = [tuple(out[i, : int(emitted[i]) + 1].tolist()) for i in range(batch)]
        tokens = fs.sampling_from_probs(
            _probs(1), seed=torch.tensor([42]), offset=torch.tensor([4])
        )
    *samples, chain, last = tap.calls
    for call, (seeds_seen, tokens_seen) in zip(samples, expected, strict=True):
        assert [r.seed for r in call.rows] == seeds_seen
        assert [r.offset for r in call.rows] == [s + 1 for s in seeds_seen]
        assert [r.tokens for r in call.rows] == tokens_seen
    assert [r.tokens for r in chain.rows] == chain_tokens
    assert [r.seed for r in chain.rows] == [7, 8, 9]
    assert [(r.seed, r.offset, r.tokens) for r in last.rows] == [(42, 4, (int(tokens[0]),))]
