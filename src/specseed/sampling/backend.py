"""The sampling backend switch: specseed's CPU twins, or flashinfer's CUDA kernels.

Both backends answer the three calls the reference engine makes (plain sampling, joint
top-k/top-p sampling, chain speculative sampling) with the same arguments: per-row seed and
offset tensors, an optional per-row Philox subsequence, and whether the kernel reads only
element 0 of the seed/offset tensors (the ``row0-seed`` defect, injected on purpose). Both
return the tokens, the draws each row consumed and the subsequence each row actually ran on.

The CPU twins (``specseed.sampling``) stay the default and the oracle. The flashinfer backend
calls ``flashinfer.sampling`` (>= 0.6.4: seed/offset as int64 tensors on the probabilities'
device, one entry per output row) and has two things to solve that the twins do not:

- Subsequence. The real kernels call ``curand_init(seed_row, blockIdx.x, offset_row)``: the
  subsequence is the row's position in the launch and cannot be passed. A contract whose
  subsequence is not the kernel row (``ideal`` uses 0 for every row) is served by splitting the
  call into launches in which every row sits at the position equal to its subsequence: rows that
  want the same subsequence go to different launches, and gaps are filled with rows whose
  output is thrown away. For ``ideal`` that is one launch of one row per request. The
  subsequence returned per row is the launch position it ran at, so a trace records what the
  kernel used, not what was asked.
- Draws. ``sampling_from_probs`` draws once per row; ``chain_speculative_sampling`` K + 1 times
  when all K drafts were accepted and K + 2 after a rejection (read from its emitted counts).
  The top-k/top-p kernels draw once per rejection round and return no count: when asked for
  draws, the backend replays those rows on the CPU twin (the same seed, offset, subsequence
  and probabilities, copied to the CPU) and takes the twin's count; rows where the twin's token
  differs from the kernel's are counted in ``draw_replay_mismatches`` (their count is the
  twin's, so a nonzero figure says the draws of those rows are not established).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Literal, Protocol

import torch

import specseed.sampling as sampling
from specseed.core.errors import EngineError
from specseed.sampling.streams import SamplingInputError

__all__ = [
    "BACKEND_NAMES",
    "MAX_PACKED_SUBSEQUENCE",
    "BackendName",
    "BackendResult",
    "CpuBackend",
    "FlashinferBackend",
    "SamplingBackend",
    "make_backend",
    "plan_launches",
]

BackendName = Literal["cpu", "flashinfer"]
BACKEND_NAMES: tuple[str, ...] = ("cpu", "flashinfer")

MAX_PACKED_SUBSEQUENCE = 65535
"""Largest subsequence the flashinfer backend reaches by padding a launch to that row."""


@dataclass(frozen=True)
class BackendResult:
    """What one engine sampling call did, per row (CPU tensors unless the input was on CUDA)."""

    tokens: torch.Tensor
    """(rows,) sampled tokens, or (rows, K + 1) for chain speculative sampling (-1 padded)."""
    draws: torch.Tensor
    """(rows,) int64: Philox draws each row consumed."""
    subsequences: Sequence[int]
    """The Philox subsequence each row ran on (the launch row for flashinfer)."""
    emitted: torch.Tensor | None = None
    """Chain speculative sampling only: draft tokens emitted per row (before the bonus)."""
    launches: int = 1
    """Kernel launches the call took."""


class SamplingBackend(Protocol):
    """The calls the reference engine makes; ``element0`` emulates the ``row0-seed`` defect."""

    name: str
    version: str | None

    def sampling_from_probs(
        self,
        probs: torch.Tensor,
        seed: torch.Tensor,
        offset: torch.Tensor,
        subsequence: torch.Tensor | None,
        *,
        element0: bool = False,
        return_draws: bool = True,
    ) -> BackendResult: ...

    def top_k_top_p_sampling_from_probs(
        self,
        probs: torch.Tensor,
        top_k: torch.Tensor,
        top_p: torch.Tensor,
        seed: torch.Tensor,
        offset: torch.Tensor,
        subsequence: torch.Tensor | None,
        *,
        element0: bool = False,
        return_draws: bool = True,
    ) -> BackendResult: ...

    def chain_speculative_sampling(
        self,
        draft_probs: torch.Tensor,
        draft_token_ids: torch.Tensor,
        target_probs: torch.Tensor,
        seed: torch.Tensor,
        offset: torch.Tensor,
        subsequence: torch.Tensor | None,
        *,
        element0: bool = False,
    ) -> BackendResult: ...


def _indexing(element0: bool) -> sampling.SeedOffsetIndexing:
    return "element0" if element0 else "per_row"


def _used(rows: int, subsequence: torch.Tensor | None) -> Sequence[int]:
    if subsequence is None:
        return range(rows)
    return tuple(int(s) for s in subsequence.tolist())


class CpuBackend:
    """specseed's CPU twins of flashinfer 0.7.4 (the default, and the oracle)."""

    name = "cpu"
    version: str | None = None

    def sampling_from_probs(
        self,
        probs: torch.Tensor,
        seed: torch.Tensor,
        offset: torch.Tensor,
        subsequence: torch.Tensor | None,
        *,
        element0: bool = False,
        return_draws: bool = True,
    ) -> BackendResult:
        tokens, draws = sampling.sampling_from_probs(
            probs,
            seed=seed,
            offset=offset,
            subsequence=subsequence,
            seed_offset_indexing=_indexing(element0),
            return_draws=True,
        )
        return BackendResult(tokens, draws, _used(probs.shape[0], subsequence))

    def top_k_top_p_sampling_from_probs(
        self,
        probs: torch.Tensor,
        top_k: torch.Tensor,
        top_p: torch.Tensor,
        seed: torch.Tensor,
        offset: torch.Tensor,
        subsequence: torch.Tensor | None,
        *,
        element0: bool = False,
        return_draws: bool = True,
    ) -> BackendResult:
        tokens, draws = sampling.top_k_top_p_sampling_from_probs(
            probs,
            top_k,
            top_p,
            filter_apply_order="joint",
            seed=seed,
            offset=offset,
            subsequence=subsequence,
            seed_offset_indexing=_indexing(element0),
            return_draws=True,
        )
        return BackendResult(tokens, draws, _used(probs.shape[0], subsequence))

    def chain_speculative_sampling(
        self,
        draft_probs: torch.Tensor,
        draft_token_ids: torch.Tensor,
        target_probs: torch.Tensor,
        seed: torch.Tensor,
        offset: torch.Tensor,
        subsequence: torch.Tensor | None,
        *,
        element0: bool = False,
    ) -> BackendResult:
        output, _accepted, emitted, draws = sampling.chain_speculative_sampling(
            draft_probs,
            draft_token_ids,
            target_probs,
            seed=seed,
            offset=offset,
            subsequence=subsequence,
            seed_offset_indexing=_indexing(element0),
            return_draws=True,
        )
        return BackendResult(output, draws, _used(draft_probs.shape[0], subsequence), emitted)


def plan_launches(rows: int, subsequence: Sequence[int] | None) -> list[list[int]]:
    """Launches that put every row at the kernel row equal to its subsequence.

    Each launch is a list of input rows by kernel row, -1 for a filler row. ``None`` (the
    subsequence is the kernel row anyway) and subsequences ``0 .. rows-1`` in order are one
    launch of the rows as they are.
    """
    if subsequence is None or list(subsequence) == list(range(rows)):
        return [list(range(rows))]
    launches: list[dict[int, int]] = []
    for row, sub in enumerate(subsequence):
        if not 0 <= sub <= MAX_PACKED_SUBSEQUENCE:
            raise SamplingInputError(
                f"subsequence {sub} of row {row} cannot be reached on flashinfer, whose kernels "
                f"use the launch row as subsequence (0 .. {MAX_PACKED_SUBSEQUENCE} by padding)"
            )
        for launch in launches:
            if sub not in launch:
                launch[sub] = row
                break
        else:
            launches.append({sub: row})
    return [[launch.get(pos, -1) for pos in range(max(launch) + 1)] for launch in launches]


class FlashinferBackend:
    """``flashinfer.sampling``'s CUDA kernels, called with per-row seed/offset tensors.

    Functions are looked up on the module at call time, so a tap installed on
    ``flashinfer.sampling`` (``specseed.taps.flashinfer_tap``) sees every call.
    """

    name = "flashinfer"

    def __init__(self, module: ModuleType, version: str, device: torch.device) -> None:
        self.fs = module
        self.version: str | None = version
        self.device = device
        self.draw_replay_mismatches = 0

    # -- helpers ---------------------------------------------------------------------------

    def _launch_args(
        self,
        launch: list[int],
        seed: torch.Tensor,
        offset: torch.Tensor,
        element0: bool,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(input rows with fillers pointing at a real row, seeds, offsets) on the device."""
        real = next(r for r in launch if r >= 0)
        src = torch.tensor([r if r >= 0 else real for r in launch], dtype=torch.int64)
        filler = torch.tensor([r < 0 for r in launch])
        if element0:
            # The whole engine call's row 0, as flashinfer 0.6.4 reads it.
            seeds = seed[:1].expand(len(launch))
            offsets = offset[:1].expand(len(launch))
        else:
            seeds = torch.where(filler, 0, seed.index_select(0, src.to(seed.device)).cpu())
            offsets = torch.where(filler, 0, offset.index_select(0, src.to(offset.device)).cpu())
        return (
            src,
            seeds.to(self.device, torch.int64).contiguous(),
            offsets.to(self.device, torch.int64).contiguous(),
        )

    def _rng(
        self, seed: torch.Tensor, offset: torch.Tensor, element0: bool
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Seed/offset tensors for a single launch of all rows, on the device."""
        if element0:
            seed, offset = seed[:1], offset[:1]
        return (
            seed.to(self.device, torch.int64).contiguous(),
            offset.to(self.device, torch.int64).contiguous(),
        )

    def _subs(self, subsequence: torch.Tensor | None) -> list[int] | None:
        return None if subsequence is None else [int(s) for s in subsequence.tolist()]

    # -- the three calls -------------------------------------------------------------------

    def _sample(
        self,
        probs: torch.Tensor,
        seed: torch.Tensor,
        offset: torch.Tensor,
        subsequence: torch.Tensor | None,
        element0: bool,
        kernel: str,
        extra: tuple[torch.Tensor, ...],
    ) -> tuple[torch.Tensor, Sequence[int], int]:
        home = probs.device
        probs_dev = probs.to(self.device, torch.float32)
        extra_dev = tuple(t.to(self.device) for t in extra)
        fn = getattr(self.fs, kernel)
        kwargs: dict[str, object] = {"deterministic": True}
        if kernel == "top_k_top_p_sampling_from_probs":
            kwargs["filter_apply_order"] = "joint"
        rows = probs.shape[0]
        launches = [] if subsequence is None else plan_launches(rows, self._subs(subsequence))
        if subsequence is None or launches == [list(range(rows))]:
            seeds, offsets = self._rng(seed, offset, element0)
            tokens = fn(probs_dev, *extra_dev, seed=seeds, offset=offsets, **kwargs)
            return tokens.to(home), range(rows), 1
        if all(launch == [row] for row, launch in enumerate(launches)):
            # Subsequence 0 for every row (``ideal``): one single-row launch per row, sliced
            # rather than gathered (a launch costs tens of microseconds; gathers double it).
            seeds, offsets = self._rng(seed, offset, False)
            if element0:
                seeds, offsets = seeds[:1].expand(rows), offsets[:1].expand(rows)
            parts = [
                fn(
                    probs_dev[i : i + 1],
                    *(t[i : i + 1] for t in extra_dev),
                    seed=seeds[i : i + 1],
                    offset=offsets[i : i + 1],
                    **kwargs,
                )
                for i in range(rows)
            ]
            return torch.cat(parts).to(home), (0,) * rows, rows
        out = torch.empty(rows, dtype=torch.int32, device=self.device)
        used = [0] * rows
        for launch in launches:
            src, seeds, offsets = self._launch_args(launch, seed, offset, element0)
            src_dev = src.to(self.device)
            part = fn(
                probs_dev.index_select(0, src_dev),
                *(t.index_select(0, src_dev) for t in extra_dev),
                seed=seeds,
                offset=offsets,
                **kwargs,
            )
            pos_t, row_t = _real_positions(launch, self.device)
            out[row_t] = part.to(torch.int32)[pos_t]
            for pos, row in enumerate(launch):
                if row >= 0:
                    used[row] = pos
        return out.to(home), tuple(used), len(launches)

    def sampling_from_probs(
        self,
        probs: torch.Tensor,
        seed: torch.Tensor,
        offset: torch.Tensor,
        subsequence: torch.Tensor | None,
        *,
        element0: bool = False,
        return_draws: bool = True,
    ) -> BackendResult:
        tokens, used, launches = self._sample(
            probs, seed, offset, subsequence, element0, "sampling_from_probs", ()
        )
        draws = torch.ones(probs.shape[0], dtype=torch.int64, device=probs.device)
        return BackendResult(tokens, draws, used, launches=launches)

    def top_k_top_p_sampling_from_probs(
        self,
        probs: torch.Tensor,
        top_k: torch.Tensor,
        top_p: torch.Tensor,
        seed: torch.Tensor,
        offset: torch.Tensor,
        subsequence: torch.Tensor | None,
        *,
        element0: bool = False,
        return_draws: bool = True,
    ) -> BackendResult:
        tokens, used, launches = self._sample(
            probs,
            seed,
            offset,
            subsequence,
            element0,
            "top_k_top_p_sampling_from_probs",
            (top_k.to(torch.int32), top_p.to(torch.float32)),
        )
        if not return_draws:
            draws = torch.full((probs.shape[0],), -1, dtype=torch.int64, device=probs.device)
            return BackendResult(tokens, draws, used, launches=launches)
        # The kernel does not say how many rounds it ran: the twin replays the same rows.
        twin_tokens, draws = sampling.top_k_top_p_sampling_from_probs(
            probs.float().cpu(),
            top_k.cpu(),
            top_p.cpu(),
            filter_apply_order="joint",
            seed=seed.cpu(),
            offset=offset.cpu(),
            subsequence=torch.tensor(used, dtype=torch.int64),
            seed_offset_indexing=_indexing(element0),
            return_draws=True,
        )
        self.draw_replay_mismatches += int((twin_tokens.cpu() != tokens.cpu()).sum())
        return BackendResult(tokens, draws, used, launches=launches)

    def chain_speculative_sampling(
        self,
        draft_probs: torch.Tensor,
        draft_token_ids: torch.Tensor,
        target_probs: torch.Tensor,
        seed: torch.Tensor,
        offset: torch.Tensor,
        subsequence: torch.Tensor | None,
        *,
        element0: bool = False,
    ) -> BackendResult:
        home = draft_probs.device
        rows, num_drafts = int(draft_token_ids.shape[0]), int(draft_token_ids.shape[1])
        d_probs = draft_probs.to(self.device, torch.float32)
        d_ids = draft_token_ids.to(self.device, torch.int32)
        t_probs = target_probs.to(self.device, torch.float32)
        if subsequence is None:
            seeds, offsets = self._rng(seed, offset, element0)
            out, _accepted, emit = self.fs.chain_speculative_sampling(
                d_probs, d_ids, t_probs, deterministic=True, seed=seeds, offset=offsets
            )
            # K + 1 draws when every draft was accepted, K + 2 after a rejection (0.7.4 kernel).
            draws = torch.where(emit >= num_drafts, num_drafts + 1, num_drafts + 2)
            return BackendResult(
                out.to(home), draws.to(home, torch.int64), range(rows), emit.to(home)
            )
        launches = plan_launches(rows, self._subs(subsequence))
        if all(launch == [row] for row, launch in enumerate(launches)):
            # Subsequence 0 for every row (``ideal``): one sliced single-row launch per row.
            seeds, offsets = self._rng(seed, offset, False)
            if element0:
                seeds, offsets = seeds[:1].expand(rows), offsets[:1].expand(rows)
            parts = [
                self.fs.chain_speculative_sampling(
                    d_probs[i : i + 1],
                    d_ids[i : i + 1],
                    t_probs[i : i + 1],
                    deterministic=True,
                    seed=seeds[i : i + 1],
                    offset=offsets[i : i + 1],
                )
                for i in range(rows)
            ]
            out = torch.cat([p[0] for p in parts])
            emit = torch.cat([p[2] for p in parts])
            draws = torch.where(emit >= num_drafts, num_drafts + 1, num_drafts + 2)
            return BackendResult(
                out.to(home), draws.to(home, torch.int64), (0,) * rows, emit.to(home), rows
            )
        output = torch.empty(rows, num_drafts + 1, dtype=torch.int32, device=self.device)
        emitted = torch.zeros(rows, dtype=torch.int32, device=self.device)
        used = [0] * rows
        for launch in launches:
            if launch == list(range(rows)):
                seeds, offsets = self._rng(seed, offset, element0)
                args: tuple[torch.Tensor, ...] = (d_probs, d_ids, t_probs)
            else:
                src, seeds, offsets = self._launch_args(launch, seed, offset, element0)
                src_dev = src.to(self.device)
                args = tuple(t.index_select(0, src_dev) for t in (d_probs, d_ids, t_probs))
            out, _accepted, emit = self.fs.chain_speculative_sampling(
                *args,
                deterministic=True,
                seed=seeds,
                offset=offsets,
            )
            pos_t, row_t = _real_positions(launch, self.device)
            output[row_t] = out[pos_t]
            emitted[row_t] = emit.to(torch.int32)[pos_t]
            for pos, row in enumerate(launch):
                if row >= 0:
                    used[row] = pos
        emitted_cpu = emitted.cpu().to(torch.int64)
        # K + 1 draws when every draft was accepted, K + 2 after a rejection (0.7.4 kernel).
        draws = torch.where(emitted_cpu >= num_drafts, num_drafts + 1, num_drafts + 2)
        return BackendResult(
            output.to(home), draws, tuple(used), emitted.to(home), launches=len(launches)
        )


def _real_positions(launch: list[int], device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """(launch positions, engine rows) of a launch's real (non-filler) rows, on ``device``."""
    pairs = [(pos, row) for pos, row in enumerate(launch) if row >= 0]
    pos_t = torch.tensor([p for p, _ in pairs], dtype=torch.int64, device=device)
    row_t = torch.tensor([r for _, r in pairs], dtype=torch.int64, device=device)
    return pos_t, row_t


def make_backend(name: str, device: str) -> SamplingBackend:
    """The backend ``engine.sampling_backend`` names, checked against ``engine.device``."""
    if name == "cpu":
        return CpuBackend()
    if name != "flashinfer":
        raise EngineError(f"unknown sampling backend {name!r}; expected one of: cpu, flashinfer")
    if device != "cuda":
        raise EngineError(
            "engine.sampling_backend is flashinfer but engine.device is cpu",
            hint="set engine.device: cuda (flashinfer's kernels run on the GPU only)",
        )
    try:
        import flashinfer
        import flashinfer.sampling as fs
    except Exception as exc:  # flashinfer raises more than ImportError when broken
        raise EngineError(
            f"engine.sampling_backend is flashinfer but flashinfer cannot be imported "
            f"({type(exc).__name__}: {exc})",
            hint="pip install 'flashinfer-python>=0.6.4' (specseed[gpu]), or set "
            "engine.sampling_backend: cpu",
        ) from exc
    if not torch.cuda.is_available():
        raise EngineError(
            "engine.sampling_backend is flashinfer but torch sees no CUDA device",
            hint="run on a machine with a GPU, or set engine.sampling_backend: cpu",
        )
    return FlashinferBackend(
        fs, str(getattr(flashinfer, "__version__", "unknown")), torch.device("cuda")
    )
