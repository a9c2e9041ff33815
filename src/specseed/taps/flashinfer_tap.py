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

Recording stays on the device. A tapped call clones the seed/offset tensors (the caller
may advance them in place before anyone reads the tap) and the tokens it returned (chain
sampling adds to a buffer the caller passed), asynchronous device copies, and moves on: no
synchronisation, no per-row Python. Reading ``calls`` copies everything recorded since the
last read to the host at once (one transfer per device and dtype); a call's columns are
built from those host tensors the first time they are read. Each record belongs to its call
object, not to a position in a list, so a tapped function that calls another tapped one
(the inner call finishes, and is appended, first) keeps its own rows. Reading ``calls``
synchronises with the GPU: the tap is an audit instrument, not something to leave on in
production (``benchmarks/bench_flashinfer.py`` measures its cost).
"""

from __future__ import annotations

import functools
import inspect
import itertools
import operator
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Literal, NamedTuple

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


class TapRow(NamedTuple):
    """One kernel row (CUDA block) of one tapped call (a named tuple: an audit builds a
    thousand per call, and a frozen dataclass costs several times more to make)."""

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
        count = len(c.tokens)
        nothing = itertools.repeat(None, count)
        return tuple(
            map(
                TapRow._make,
                zip(
                    range(count),
                    range(count),
                    c.seeds or nothing,
                    c.offsets or nothing,
                    c.seeds_given or nothing,
                    c.offsets_given or nothing,
                    c.draws,
                    c.tokens,
                    strict=False,
                ),
            )
        )


@dataclass
class _Patch:
    module: ModuleType
    attr: str
    original: object


def _uint64(value: int) -> int:
    return int(value) & _UINT64


def _as_uint64(flat: torch.Tensor) -> list[int]:
    """A 1-D integer tensor's values as uint64 Python ints (one C-level ``tolist``)."""
    if flat.dtype == torch.int64:
        return flat.view(torch.uint64).tolist()  # two's complement: the bits the kernel reads
    if flat.dtype == torch.uint64:
        return flat.tolist()
    return [v & _UINT64 for v in flat.tolist()]


def _read(value: object, rows: int, element0: bool) -> tuple[list[int], list[int]] | None:
    """(used, given) per row for a seed or offset argument, or None if absent."""
    if value is None:
        return None
    if rows == 0:
        return [], []
    if isinstance(value, torch.Tensor):
        flat = _as_uint64(value.reshape(-1))
        given = flat[:rows] if len(flat) >= rows else [flat[0]] * rows
        used = [flat[0]] * rows if (element0 or len(flat) == 1) else given
        return used, given
    scalar = _uint64(int(value))  # type: ignore[call-overload]
    return [scalar] * rows, [scalar] * rows


class _Record:
    """One call's recorded values: device tensors until the tap copies them, then host ones.

    ``kept`` is (seed, offset, output tokens, emitted counts, emitted counts before the call):
    private copies where they are tensors, the arguments as given otherwise.
    """

    __slots__ = ("element0", "function", "kept", "num_drafts", "rows")

    def __init__(
        self, function: str, rows: int, num_drafts: int, element0: bool, kept: list[Any]
    ) -> None:
        self.function = function
        self.rows = rows
        self.num_drafts = num_drafts
        self.element0 = element0
        self.kept = kept

    def tensors(self) -> list[torch.Tensor]:
        return [t for t in self.kept if isinstance(t, torch.Tensor) and t.device.type != "cpu"]

    def columns(self) -> TapColumns:
        """The columns, from host tensors (a record read before any flush copies its own)."""
        host = [t.cpu() if isinstance(t, torch.Tensor) else t for t in self.kept]
        seed, offset, output, emitted, before = host
        count = self.rows
        seeds = _read(seed, count, self.element0)
        offsets = _read(offset, count, self.element0)
        draws: list[int | None]
        if self.function == "chain_speculative_sampling":
            emitted_now = emitted.to(torch.int64)
            if before is not None:
                emitted_now = emitted_now - before.to(torch.int64)
            emitted_now = emitted_now[:count]
            k = self.num_drafts
            ends = (emitted_now + 1).tolist()
            tokens = list(map(tuple, map(operator.getitem, output.tolist(), map(slice, ends))))
            draws = torch.where(emitted_now >= k, k + 1, k + 2).tolist()
        else:
            tokens = list(zip(output.reshape(-1).tolist(), strict=False))
            draws = [1 if self.function in _ONE_DRAW else None] * count
        return TapColumns(
            seeds=seeds[0] if seeds else None,
            offsets=offsets[0] if offsets else None,
            seeds_given=seeds[1] if seeds else None,
            offsets_given=offsets[1] if offsets else None,
            draws=draws,
            tokens=tokens,
        )


class _RecordedColumns(TapColumns):
    """``TapColumns`` built from a ``_Record`` the first time a field is read.

    Building a thousand-row call's lists costs far more than the kernel that made them; an
    audit reads them after the run, so the run does not wait for them. The dataclass
    ``__init__`` is not run: every field is a property over the built columns, which
    ``dataclasses.asdict``, ``==`` and ``repr`` read like stored fields.
    """

    def __init__(self, record: _Record) -> None:
        object.__setattr__(self, "_record", record)

    @functools.cached_property
    def _built(self) -> TapColumns:
        record: _Record = self.__dict__["_record"]
        return record.columns()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TapColumns):
            return NotImplemented
        return all(getattr(self, f) == getattr(other, f) for f in _COLUMN_FIELDS)

    __hash__ = None  # type: ignore[assignment]  # lists inside: unhashable, like the base

    seeds = property(lambda self: self._built.seeds)
    offsets = property(lambda self: self._built.offsets)
    seeds_given = property(lambda self: self._built.seeds_given)
    offsets_given = property(lambda self: self._built.offsets_given)
    draws = property(lambda self: self._built.draws)
    tokens = property(lambda self: self._built.tokens)


_COLUMN_FIELDS = ("seeds", "offsets", "seeds_given", "offsets_given", "draws", "tokens")


def _to_host(records: list[_Record]) -> None:
    """Move every record's device tensors to the host: one concatenation and one copy per
    device and dtype, however many calls were recorded."""
    groups: dict[tuple[torch.device, torch.dtype], list[torch.Tensor]] = {}
    for record in records:
        for t in record.tensors():
            groups.setdefault((t.device, t.dtype), []).append(t)
    host: dict[int, torch.Tensor] = {}
    for group in groups.values():
        flat = torch.cat([t.reshape(-1) for t in group]).cpu()
        for t, part in zip(group, flat.split([t.numel() for t in group]), strict=True):
            host[id(t)] = part.view(t.shape)
    for record in records:
        record.kept = [
            host.get(id(v), v) if isinstance(v, torch.Tensor) else v for v in record.kept
        ]


def _kept_pair(seed: Any, offset: Any) -> tuple[Any, Any]:
    """Private copies of the seed and offset arguments: one stacked copy (one launch) where
    they are tensors of one shape, dtype and device."""
    if (
        isinstance(seed, torch.Tensor)
        and isinstance(offset, torch.Tensor)
        and seed.shape == offset.shape
        and seed.dtype == offset.dtype
        and seed.device == offset.device
    ):
        both = torch.stack((seed, offset))
        return both[0], both[1]
    return _kept(seed), _kept(offset)


def _kept(value: Any) -> Any:
    """A private copy of a tensor argument or result (other values as they are)."""
    return value.clone() if isinstance(value, torch.Tensor) else value


@dataclass
class FlashinferTap:
    """Wraps ``flashinfer.sampling``'s functions while installed (a context manager).

    ``module`` defaults to the imported ``flashinfer.sampling``; ``version`` to its package's
    ``__version__``. ``calls`` grows as the engine runs.
    """

    module: ModuleType | None = None
    version: str | None = None
    aliases_patched: list[str] = field(default_factory=list)
    """``module.attr`` of every reference outside the sampling module that was replaced."""
    _patches: list[_Patch] = field(default_factory=list)
    _calls: list[TapCall] = field(default_factory=list, init=False, repr=False)
    _pending: list[_Record] = field(default_factory=list, init=False, repr=False)
    """Records whose tensors are still on the device (copied when ``calls`` is read)."""

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
    def calls(self) -> list[TapCall]:
        """Every call so far, in the order the calls returned (reading it copies what was
        recorded since the last read to the host, once; clearing it forgets them)."""
        if self._pending:
            pending, self._pending = self._pending, []
            _to_host(pending)
        return self._calls

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
        bind = _binder(signature)
        element0 = reads_element0_only(self.version)
        chain = name == "chain_speculative_sampling"
        # Asked once: is_available() queries the driver on every call, a cost per tapped call
        # that the kernel's own wrapper does not pay.
        capturing = _capturing if torch.cuda.is_available() else _never

        @functools.wraps(original)
        def tapped(*args: Any, **kwargs: Any) -> Any:
            if capturing():
                result = original(*args, **kwargs)
                self._calls.append(
                    TapCall(len(self._calls), name, "tensor", None, False, self.version, None, True)
                )
                return result
            bound = bind(args, kwargs)
            before_emitted = None
            num_drafts = 0
            if chain:
                num_drafts = int(bound["draft_token_ids"].shape[1])
                given = bound.get("maybe_output_emitted_draft_token_num")
                if isinstance(given, torch.Tensor):
                    before_emitted = given.clone()
            seed_arg, offset_arg = bound.get("seed"), bound.get("offset")
            # Copies: the caller may advance its seed/offset buffers before the tap is read.
            seed_kept, offset_kept = _kept_pair(seed_arg, offset_arg)
            rows = _row_count(name, bound)
            result = original(*args, **kwargs)
            if chain:
                # The emitted counts are the caller's buffer when it passed one: copy them.
                output, emitted = _kept(result[0]), _kept(result[2])
            else:
                output, emitted = _kept(result[0] if isinstance(result, tuple) else result), None
            record = _Record(
                name, rows, num_drafts, element0,
                [seed_kept, offset_kept, output, emitted, before_emitted],
            )  # fmt: skip
            # The index is taken after the call: a tapped function that calls another tapped
            # one (a joint kernel through its parts) appends the inner call first. The record
            # travels with its own call object, so no position has to line up later.
            self._calls.append(
                TapCall(
                    index=len(self._calls),
                    function=name,
                    seed_kind=_seed_kind(seed_arg, offset_arg),
                    seed_length=int(seed_arg.numel())
                    if isinstance(seed_arg, torch.Tensor)
                    else None,
                    element0=element0,
                    flashinfer_version=self.version,
                    columns=_RecordedColumns(record),
                )
            )
            self._pending.append(record)
            return result

        disable = getattr(getattr(torch, "compiler", None), "disable", None)
        return disable(tapped) if disable is not None else tapped


def _capturing() -> bool:
    return bool(torch.cuda.is_current_stream_capturing())


def _never() -> bool:
    return False


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


def _binder(
    signature: inspect.Signature | None,
) -> Callable[[tuple[Any, ...], dict[str, Any]], dict[str, Any]]:
    """A fast ``_bind`` for one signature: positional arguments zipped with the leading
    positional parameters' names (``Signature.bind`` costs more than a small kernel launch);
    anything else goes through ``_bind``."""
    names: list[str] = []
    if signature is not None:
        for param in signature.parameters.values():
            if param.kind not in (param.POSITIONAL_ONLY, param.POSITIONAL_OR_KEYWORD):
                break
            names.append(param.name)

    def bind(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        if (
            signature is None
            or len(args) > len(names)
            or any(n in kwargs for n in names[: len(args)])
        ):
            return _bind(signature, args, kwargs)
        bound = dict(zip(names, args, strict=False))
        bound.update(kwargs)
        return bound

    return bind


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
