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

Recording stays on the device. A tapped call copies what it must keep into one private byte
tensor before the kernel runs (the seed/offset tensors, which the caller may advance in
place, and chain sampling's emitted counts, which the kernel adds to) and one after it (the
tokens returned and the emitted counts, buffers the caller may reuse): two asynchronous
device copies (more only for tensors on several devices or not contiguous), no
synchronisation, no per-row Python. The copies of every call since the last read of
``calls`` sit side by side in one chunk per device, which that read copies to the host at
once (one concatenation and one transfer per device, however many calls); a call's columns
are built from its bytes of the host chunk the first time they are read. Each record
belongs to its call object, not to a position in a list, so a tapped function that calls
another tapped one (the inner call finishes, and is appended, first) keeps its own rows.
Reading ``calls`` synchronises with the GPU: the tap is an audit instrument, not something
to leave on in production (``benchmarks/bench_flashinfer.py`` measures its cost).
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
        # tuple.__new__(TapRow, values) is what TapRow._make does, less its Python frame: a
        # thousand rows per call are built at C speed.
        return tuple(
            map(
                tuple.__new__,
                itertools.repeat(TapRow, count),
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


class _Chunk:
    """The byte copies of every call since the last read, on one device (``key``: the
    device's index, -1 for the CPU), until ``close`` copies them to the host in one transfer.

    ``owner`` is the tap's map of open chunks: a closed chunk leaves it, so the next call opens
    a new one.
    """

    __slots__ = ("host", "key", "owner", "parts", "size")

    def __init__(self, owner: dict[int, _Chunk], key: int) -> None:
        self.owner = owner
        self.key = key
        self.parts: list[torch.Tensor] = []
        self.size = 0
        self.host: torch.Tensor | None = None

    def close(self) -> torch.Tensor:
        """The chunk's bytes on the host (one concatenation and one copy, the first time)."""
        if self.host is None:
            parts, self.parts = self.parts, []
            if self.owner.get(self.key) is self:
                del self.owner[self.key]
            data = torch.cat(parts) if len(parts) > 1 else parts[0]
            self.host = data.cpu()
        return self.host


class _Snapshot:
    """Private copies of some of a call's tensors, as one byte tensor (one device copy).

    ``layout`` holds, per tensor, (slot in the record, dtype, shape, first byte, bytes): what
    is needed to read the tensor back from the bytes on the host.
    """

    __slots__ = ("chunk", "data", "layout", "start")

    def __init__(self, tensors: list[tuple[int, torch.Tensor]]) -> None:
        layout = []
        start = 0
        for slot, t in tensors:
            size = t.numel() * t.element_size()
            layout.append((slot, t.dtype, t.shape, start, size))
            start += size
        self.layout = layout
        first = tensors[0][1]
        if (
            len(tensors) == 2
            and first.dim() == 1
            and tensors[1][1].dim() == 1
            and first.dtype == tensors[1][1].dtype
        ):
            # The seed/offset pair as flashinfer takes it: one copy of both, then a byte view.
            self.data = torch.cat((first, tensors[1][1])).view(torch.uint8)
        else:
            self.data = torch.cat([_flat_bytes(t) for _, t in tensors])
        self.chunk: _Chunk | None = None
        self.start = 0

    def place(self, chunks: dict[int, _Chunk]) -> None:
        """Hand the bytes to the device's open chunk (after the call returned: a call that
        raised leaves nothing behind)."""
        key = self.data.get_device()
        chunk = chunks.get(key)
        if chunk is None:
            chunk = chunks[key] = _Chunk(chunks, key)
        self.chunk = chunk
        self.start = chunk.size
        chunk.parts.append(self.data)
        chunk.size += self.data.numel()
        del self.data

    def read_into(self, kept: list[Any]) -> None:
        """Put the host copy of each tensor into its slot of ``kept``."""
        assert self.chunk is not None
        host = self.chunk.close()
        for slot, dtype, shape, start, size in self.layout:
            first = self.start + start
            part = host[first : first + size]
            if first % dtype.itemsize:  # after an odd number of 4-byte tokens, say
                part = part.clone()
            kept[slot] = part.view(dtype).reshape(shape)


def _flat_bytes(t: torch.Tensor) -> torch.Tensor:
    """A tensor's elements in row-major order as a 1-D byte view (a copy where the tensor is
    not contiguous)."""
    return t.contiguous().reshape(-1).view(torch.uint8)


def _snapshots(values: list[Any], slots: tuple[int, ...]) -> list[_Snapshot]:
    """One copy of the tensors among ``values[slot]`` (per device, for a caller that mixes
    devices); none when none is a tensor."""
    tensors = [(slot, values[slot]) for slot in slots if isinstance(values[slot], torch.Tensor)]
    if not tensors:
        return []
    device = tensors[0][1].device
    if any(t.device != device for _, t in tensors[1:]):
        return [_Snapshot([item]) for item in tensors]
    return [_Snapshot(tensors)]


_SEED, _OFFSET, _OUTPUT, _EMITTED, _EMITTED_BEFORE = range(5)
_BEFORE_CALL = (_SEED, _OFFSET, _EMITTED_BEFORE)
_AFTER_CALL = (_OUTPUT, _EMITTED)


class _Record:
    """One call's recorded values.

    ``kept`` is (seed, offset, output tokens, emitted counts, emitted counts before the call):
    the arguments as given where they are not tensors; a tensor's slot is None here, and its
    private copy sits in one of ``snapshots``.
    """

    __slots__ = ("element0", "function", "kept", "num_drafts", "rows", "snapshots")

    def __init__(
        self,
        function: str,
        rows: int,
        num_drafts: int,
        element0: bool,
        kept: list[Any],
        snapshots: list[_Snapshot],
    ) -> None:
        self.function = function
        self.rows = rows
        self.num_drafts = num_drafts
        self.element0 = element0
        self.kept = kept
        self.snapshots = snapshots

    def columns(self) -> TapColumns:
        """The columns, from the host copy of the call's bytes (a record read before its
        chunk was copied copies the chunk)."""
        kept = list(self.kept)
        for snapshot in self.snapshots:
            snapshot.read_into(kept)
        seed, offset, output, emitted, before = kept
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
        built = self.__dict__["_record"].columns()
        # The record, and with it this call's share of the host bytes, is no longer needed.
        del self.__dict__["_record"]
        return built

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
    _open: dict[int, _Chunk] = field(default_factory=dict, init=False, repr=False)
    """Chunks whose bytes are still on the device, by device index (copied when ``calls`` is
    read)."""

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
        for chunk in list(self._open.values()):
            chunk.close()
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
        read = _reader(signature)
        element0 = reads_element0_only(self.version)
        chain = name == "chain_speculative_sampling"
        # Asked once: is_available() queries the driver on every call, a cost per tapped call
        # that the kernel's own wrapper does not pay.
        capturing = _capturing if torch.cuda.is_available() else _never
        calls, chunks, version = self._calls, self._open, self.version

        @functools.wraps(original)
        def tapped(*args: Any, **kwargs: Any) -> Any:
            if capturing():
                result = original(*args, **kwargs)
                calls.append(TapCall(len(calls), name, "tensor", None, False, version, None, True))
                return result
            seed, offset, indices, probs, logits, draft_probs, draft_ids, emitted_in = read(
                args, kwargs
            )
            kept = [seed, offset, None, None, None]
            num_drafts = 0
            if chain:
                num_drafts = int(draft_ids.shape[1])
                probs = draft_probs
                if isinstance(emitted_in, torch.Tensor):
                    kept[_EMITTED_BEFORE] = emitted_in
            rows = _row_count(indices, probs, logits)
            # Copied before the call: the kernel adds to the emitted counts, and the caller may
            # advance its seed/offset buffers before anyone reads the tap.
            snapshots = _snapshots(kept, _BEFORE_CALL)
            result = original(*args, **kwargs)
            if chain:
                kept[_OUTPUT], kept[_EMITTED] = result[0], result[2]
            else:
                kept[_OUTPUT] = result[0] if isinstance(result, tuple) else result
            # The tokens and counts are copied too, in one copy (chain sampling adds to a
            # buffer the caller passed). A freshly allocated result is no exception: once
            # returned it is the caller's, who may write into it, through torch or through a
            # kernel of its own that no version counter sees.
            snapshots += _snapshots(kept, _AFTER_CALL)
            for snapshot in snapshots:
                snapshot.place(chunks)
            for slot in _BEFORE_CALL + _AFTER_CALL:
                if isinstance(kept[slot], torch.Tensor):
                    kept[slot] = None  # the copy is what is read; the caller's tensor is let go
            # The index is taken after the call: a tapped function that calls another tapped
            # one (a joint kernel through its parts) appends the inner call first. The record
            # travels with its own call object, so no position has to line up later.
            calls.append(
                TapCall(
                    len(calls),
                    name,
                    _seed_kind(seed, offset),
                    int(seed.numel()) if isinstance(seed, torch.Tensor) else None,
                    element0,
                    version,
                    _RecordedColumns(_Record(name, rows, num_drafts, element0, kept, snapshots)),
                )
            )
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


_ARGUMENTS = (
    "seed",
    "offset",
    "indices",
    "probs",
    "logits",
    "draft_probs",
    "draft_token_ids",
    "maybe_output_emitted_draft_token_num",
)
"""The arguments a tapped call reads, in the order ``_reader``'s function returns them."""


def _bind(
    signature: inspect.Signature | None, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> dict[str, Any]:
    if signature is not None:
        try:
            return dict(signature.bind(*args, **kwargs).arguments)
        except TypeError:
            pass
    return dict(kwargs)


def _reader(
    signature: inspect.Signature | None,
) -> Callable[[tuple[Any, ...], dict[str, Any]], tuple[Any, ...]]:
    """A function of (args, kwargs) that returns the ``_ARGUMENTS`` of a call (None where not
    passed), with each one's position worked out once per wrapped function:
    ``Signature.bind`` per call costs more than a small kernel launch. Calls with more
    positional arguments than named parameters go through ``Signature.bind``."""
    names: list[str] = []
    if signature is not None:
        for param in signature.parameters.values():
            if param.kind not in (param.POSITIONAL_ONLY, param.POSITIONAL_OR_KEYWORD):
                break
            names.append(param.name)
    where = tuple((arg, names.index(arg) if arg in names else len(names)) for arg in _ARGUMENTS)
    positional = len(names)

    def read(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
        given = len(args)
        if given > positional:
            bound = _bind(signature, args, kwargs)
            return tuple(bound.get(arg) for arg in _ARGUMENTS)
        return tuple(args[i] if i < given else kwargs.get(arg) for arg, i in where)

    return read


def _seed_kind(seed: object, offset: object) -> SeedKind:
    if seed is None or offset is None:
        return "generator"
    return "tensor" if isinstance(seed, torch.Tensor) else "scalar"


def _row_count(indices: object, probs: object, logits: object) -> int:
    if isinstance(indices, torch.Tensor):
        return int(indices.shape[0])
    first = probs if probs is not None else logits
    return int(first.shape[0]) if isinstance(first, torch.Tensor) else 0
