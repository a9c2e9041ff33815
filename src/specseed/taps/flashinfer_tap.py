"""A tap on ``flashinfer.sampling``: which Philox state every sampling kernel row ran on.

Engines that sample through flashinfer (TensorRT-LLM's one-model speculative path, specseed's
own reference engine with ``sampling_backend: flashinfer``) expose their RNG state only as the
seed/offset arguments of these calls. ``FlashinferTap`` wraps the sampling functions in place
and records, per call and per kernel row:

- the seed and offset the kernel used for the row (uint64), and the value that was passed at
  the row's index: flashinfer 0.6.4 .. 0.7.1 read only element 0 of the seed/offset tensors,
  so there the two differ for a mixed-seed batch;
- the subsequence: flashinfer's kernels call ``curand_init(seed, blockIdx.x, offset)``, so it
  is the row (the output row index) on every release;
- the draws: 1 for ``sampling_from_probs`` and ``min_p_sampling_from_probs``; for
  ``chain_speculative_sampling`` K + 1 when every draft was emitted and K + 2 after a rejection
  (read from its emitted counts); ``None`` (unknown) for the top-k / top-p kernels, whose
  rejection rounds are data-dependent and not returned;
- the tokens returned, whether seeds came as tensors, as scalars, or from a torch generator
  (``seed``/``offset`` left out), and the flashinfer version.

Code that did ``from flashinfer.sampling import X`` before the tap was installed holds its own
reference to ``X``: ``install`` also replaces every module attribute in ``sys.modules`` that is
one of the wrapped function objects, and ``uninstall`` puts them all back. References held
elsewhere (a dict, a closure, a default argument) are not found.

What a Python-level tap cannot see, and says so in ``blind_spots()``: calls captured into a
CUDA graph (the wrapper runs once at capture; replays skip Python: counted as
``captured_calls``, no rows recorded), and graphs that ``torch.compile`` built before the tap
was installed (they call flashinfer's custom ops directly). The wrapper is excluded from
compilation (``torch.compiler.disable``), so code compiled after installation still calls it
eagerly.

Reading seeds and tokens synchronises with the GPU: the tap is an audit instrument, not
something to leave on in production (``benchmarks/bench_flashinfer.py`` measures its cost).
"""

from __future__ import annotations

import functools
import inspect
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Literal

import torch

__all__ = [
    "TAPPED_FUNCTIONS",
    "FlashinferTap",
    "TapCall",
    "TapColumns",
    "TapRow",
    "reads_element0_only",
]

TAPPED_FUNCTIONS: tuple[str, ...] = (
    "sampling_from_probs",
    "sampling_from_logits",
    "top_p_sampling_from_probs",
    "top_k_sampling_from_probs",
    "min_p_sampling_from_probs",
    "top_k_top_p_sampling_from_probs",
    "top_k_top_p_sampling_from_logits",
    "chain_speculative_sampling",
)
"""The ``flashinfer.sampling`` functions that draw Philox numbers (those present are wrapped)."""

_ONE_DRAW = frozenset({"sampling_from_probs", "min_p_sampling_from_probs"})
_UINT64 = (1 << 64) - 1

SeedKind = Literal["tensor", "scalar", "generator"]


def reads_element0_only(version: str | None) -> bool:
    """flashinfer 0.6.4 .. 0.7.1 read only element 0 of per-row seed/offset tensors."""
    if not version:
        return False
    parts: list[int] = []
    for piece in version.split("+")[0].split(".")[:3]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    while len(parts) < 3:
        parts.append(0)
    return (0, 6, 4) <= tuple(parts) < (0, 7, 2)


@dataclass(frozen=True)
class TapRow:
    """One kernel row (CUDA block) of one tapped call."""

    row: int
    """Output row index: flashinfer's ``blockIdx.x``."""
    subsequence: int
    """Philox subsequence the kernel used: the row, on every flashinfer release."""
    seed: int | None
    """uint64 seed the kernel used for this row (None: drawn from a torch generator)."""
    offset: int | None
    """uint64 offset of the row's first draw (None: drawn from a torch generator)."""
    seed_given: int | None
    """uint64 seed passed at this row's index (differs from ``seed`` where only element 0 is
    read, or where a length-1 tensor or a scalar is broadcast)."""
    offset_given: int | None
    draws: int | None
    """Philox outputs the row consumed; None where the kernel's count is data-dependent."""
    tokens: tuple[int, ...]
    """The sampled token, or for chain speculative sampling the emitted tokens."""


@dataclass(frozen=True)
class TapColumns:
    """What a call's rows were read as, column by column (rows are built when asked for:
    building a thousand row objects per call would make the tap several times slower)."""

    seeds: list[int] | None
    offsets: list[int] | None
    seeds_given: list[int] | None
    offsets_given: list[int] | None
    draws: list[int | None]
    tokens: list[tuple[int, ...]]


@dataclass(frozen=True)
class TapCall:
    """One call of a wrapped ``flashinfer.sampling`` function."""

    index: int
    function: str
    seed_kind: SeedKind
    seed_length: int | None
    """Length of the seed tensor (None for scalars and generators)."""
    element0: bool
    """Whether this flashinfer release reads only element 0 of the seed/offset tensors."""
    flashinfer_version: str | None
    columns: TapColumns | None = None
    """The rows as read; None for a call seen during CUDA graph capture."""
    captured: bool = False
    """Seen while a CUDA graph was being captured: no rows read, replays are invisible."""

    @functools.cached_property
    def rows(self) -> tuple[TapRow, ...]:
        """One ``TapRow`` per kernel row (output row)."""
        c = self.columns
        if c is None:
            return ()
        return tuple(
            TapRow(
                row=i,
                subsequence=i,
                seed=c.seeds[i] if c.seeds else None,
                offset=c.offsets[i] if c.offsets else None,
                seed_given=c.seeds_given[i] if c.seeds_given else None,
                offset_given=c.offsets_given[i] if c.offsets_given else None,
                draws=c.draws[i],
                tokens=c.tokens[i],
            )
            for i in range(len(c.tokens))
        )


@dataclass
class _Patch:
    module: ModuleType
    attr: str
    original: object


def _uint64(value: int) -> int:
    return int(value) & _UINT64


def _read(value: object, rows: int, element0: bool) -> tuple[list[int], list[int]] | None:
    """(used, given) per row for a seed or offset argument, or None if absent."""
    if value is None:
        return None
    if isinstance(value, torch.Tensor):
        flat = [v & _UINT64 for v in value.reshape(-1).tolist()]
        given = flat[:rows] if len(flat) >= rows else [flat[0]] * rows
        used = [flat[0]] * rows if (element0 or len(flat) == 1) else given
        return used, given
    scalar = _uint64(int(value))  # type: ignore[call-overload]
    return [scalar] * rows, [scalar] * rows


@dataclass
class FlashinferTap:
    """Wraps ``flashinfer.sampling``'s functions while installed (a context manager).

    ``module`` defaults to the imported ``flashinfer.sampling``; ``version`` to its package's
    ``__version__``. ``calls`` grows as the engine runs.
    """

    module: ModuleType | None = None
    version: str | None = None
    calls: list[TapCall] = field(default_factory=list)
    aliases_patched: list[str] = field(default_factory=list)
    """``module.attr`` of every reference outside the sampling module that was replaced."""
    _patches: list[_Patch] = field(default_factory=list)

    # -- install / uninstall ---------------------------------------------------------------

    def install(self) -> FlashinferTap:
        if self._patches:
            return self
        if self.module is None:
            import flashinfer.sampling as fs

            self.module = fs
        if self.version is None:
            package = sys.modules.get(self.module.__name__.rpartition(".")[0])
            self.version = str(getattr(package, "__version__", "")) or None
        originals: dict[int, tuple[str, object]] = {}
        wrappers: dict[int, object] = {}
        for name in TAPPED_FUNCTIONS:
            original = getattr(self.module, name, None)
            if original is None:
                continue
            wrapper = self._wrap(name, original)
            originals[id(original)] = (name, original)
            wrappers[id(original)] = wrapper
            self._patches.append(_Patch(self.module, name, original))
            setattr(self.module, name, wrapper)
        # Modules that imported the functions by name hold the original objects.
        for mod_name, mod in list(sys.modules.items()):
            if mod is None or mod is self.module:
                continue
            try:
                items = list(vars(mod).items())
            except Exception:  # odd module objects (lazy loaders, shims) are not importers
                continue
            for attr, value in items:
                key = id(value)
                if key in originals and originals[key][1] is value:
                    self._patches.append(_Patch(mod, attr, value))
                    setattr(mod, attr, wrappers[key])
                    self.aliases_patched.append(f"{mod_name}.{attr}")
        return self

    def uninstall(self) -> None:
        for patch in reversed(self._patches):
            setattr(patch.module, patch.attr, patch.original)
        self._patches.clear()

    def __enter__(self) -> FlashinferTap:
        return self.install()

    def __exit__(self, *exc: object) -> None:
        self.uninstall()

    @property
    def installed(self) -> bool:
        return bool(self._patches)

    # -- what was seen -----------------------------------------------------------------------

    @property
    def captured_calls(self) -> int:
        return sum(1 for call in self.calls if call.captured)

    def rows(self) -> Iterator[tuple[TapCall, TapRow]]:
        """Every recorded kernel row in call order."""
        for call in self.calls:
            for row in call.rows:
                yield call, row

    def blind_spots(self) -> list[str]:
        """What this tap may have missed, one sentence each (empty when nothing is known)."""
        notes = []
        if self.captured_calls:
            notes.append(
                f"{self.captured_calls} call(s) ran while a CUDA graph was being captured: "
                "their replays do not pass through Python and are not recorded (turn CUDA "
                "graphs off while tapping)"
            )
        graphs = _compiled_graph_count()
        if graphs:
            notes.append(
                f"torch.compile built {graphs} graph(s) in this process: graphs built before "
                "the tap was installed call flashinfer's kernels directly and are not seen"
            )
        return notes

    # -- the wrapper -------------------------------------------------------------------------

    def _wrap(self, name: str, original: Any) -> Callable[..., Any]:
        try:
            signature: inspect.Signature | None = inspect.signature(original)
        except (TypeError, ValueError):
            signature = None

        @functools.wraps(original)
        def tapped(*args: Any, **kwargs: Any) -> Any:
            if _capturing():
                result = original(*args, **kwargs)
                self.calls.append(
                    TapCall(len(self.calls), name, "tensor", None, False, self.version, None, True)
                )
                return result
            bound = _bind(signature, args, kwargs)
            before_emitted = None
            if name == "chain_speculative_sampling":
                given = bound.get("maybe_output_emitted_draft_token_num")
                if isinstance(given, torch.Tensor):
                    before_emitted = given.detach().clone()
            seed_arg, offset_arg = bound.get("seed"), bound.get("offset")
            rows = _row_count(name, bound)
            element0 = reads_element0_only(self.version)
            seeds = _read(seed_arg, rows, element0)
            offsets = _read(offset_arg, rows, element0)
            result = original(*args, **kwargs)
            self.calls.append(
                TapCall(
                    index=len(self.calls),
                    function=name,
                    seed_kind=_seed_kind(seed_arg, offset_arg),
                    seed_length=int(seed_arg.numel())
                    if isinstance(seed_arg, torch.Tensor)
                    else None,
                    element0=element0,
                    flashinfer_version=self.version,
                    columns=_columns(name, bound, result, rows, seeds, offsets, before_emitted),
                )
            )
            return result

        disable = getattr(getattr(torch, "compiler", None), "disable", None)
        return disable(tapped) if disable is not None else tapped


def _capturing() -> bool:
    return bool(torch.cuda.is_available() and torch.cuda.is_current_stream_capturing())


def _compiled_graph_count() -> int:
    dynamo = sys.modules.get("torch._dynamo.utils")
    if dynamo is None:
        return 0
    try:
        return int(dynamo.counters["stats"]["unique_graphs"])
    except (AttributeError, KeyError, TypeError):
        return 0


def _bind(
    signature: inspect.Signature | None, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> dict[str, Any]:
    if signature is not None:
        try:
            return dict(signature.bind(*args, **kwargs).arguments)
        except TypeError:
            pass
    return dict(kwargs)


def _seed_kind(seed: object, offset: object) -> SeedKind:
    if seed is None or offset is None:
        return "generator"
    return "tensor" if isinstance(seed, torch.Tensor) else "scalar"


def _row_count(name: str, bound: dict[str, Any]) -> int:
    indices = bound.get("indices")
    if isinstance(indices, torch.Tensor):
        return int(indices.shape[0])
    first = bound.get("draft_probs" if name == "chain_speculative_sampling" else "probs")
    if first is None:
        first = bound.get("logits")
    return int(first.shape[0]) if isinstance(first, torch.Tensor) else 0


def _columns(
    name: str,
    bound: dict[str, Any],
    result: Any,
    count: int,
    seeds: tuple[list[int], list[int]] | None,
    offsets: tuple[list[int], list[int]] | None,
    before_emitted: torch.Tensor | None,
) -> TapColumns:
    if name == "chain_speculative_sampling":
        output, _accepted, emitted = result
        emitted_now = emitted.detach().to(torch.int64).cpu()
        if before_emitted is not None:
            emitted_now = emitted_now - before_emitted.to(torch.int64).cpu()
        num_drafts = int(bound["draft_token_ids"].shape[1])
        out_rows = output.tolist()
        emitted_list = emitted_now.tolist()
        tokens = [tuple(out_rows[i][: emitted_list[i] + 1]) for i in range(count)]
        draws: list[int | None] = [
            num_drafts + 1 if e >= num_drafts else num_drafts + 2 for e in emitted_list
        ]
    else:
        samples = result[0] if isinstance(result, tuple) else result
        tokens = [(t,) for t in samples.tolist()]
        draws = [1 if name in _ONE_DRAW else None] * count
    return TapColumns(
        seeds=seeds[0] if seeds else None,
        offsets=offsets[0] if offsets else None,
        seeds_given=seeds[1] if seeds else None,
        offsets_given=offsets[1] if offsets else None,
        draws=draws,
        tokens=tokens,
    )
