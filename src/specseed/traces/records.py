"""Trace records: what an engine did, step by step, and their versioned JSONL form.

An engine adapter emits one :class:`RunHeader`, then one :class:`StepRecord` per engine step,
then one :class:`RunEnd`. The JSONL form writes each record as one line as soon as it exists
(``TraceWriter``), so a crash mid-run leaves the evidence up to that step on disk.

Every integer RNG field (seed, subsequence, offset) is a uint64 written as a plain JSON
integer. Schema changes bump ``TRACE_SCHEMA_VERSION``; readers refuse other major versions.
Records are written and read through pydantic (``TypeAdapter`` over these dataclasses), which
also gives the format its JSON Schema (``trace_json_schema``, ``specseed schema --kind trace``).
The schema is documented in ARCHITECTURE.md ("Trace format").
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import IO, Any, Literal, TypeVar

from pydantic import ConfigDict, TypeAdapter

from specseed.core.contracts import EventKind
from specseed.core.errors import TraceWriteError
from specseed.core.secrets import scrub_text

T = TypeVar("T")

TRACE_SCHEMA_VERSION = "1.3"
"""1.1 added ``observability``, ``fresh_engine``, ``warmup_batches``, ``warmup_batch`` and
``not_served``; 1.0 traces (written by the reference engine only) read with the reference
engine's values. 1.2 added the failure's ``traceback`` (1.0 and 1.1 traces read with it
empty). 1.3 added the requests' sampling knobs (``REQUEST_KNOBS``, written only where set)
and ``parent``, and the end's ``finish_reasons``, ``logprobs`` and ``refused``: older traces
read with no knob set and nothing reported (checks that need them skip)."""

Phase = Literal["warmup", "prior", "scenario"]
"""Which traffic a row belongs to: engine warmup, prior traffic (uptime), or the scenario."""

Evidence = Literal["tokens", "steps", "rng-state", "drafts", "logits"]
"""What a check can need from a trace. ``tokens`` is always there."""
EVIDENCE: tuple[Evidence, ...] = ("tokens", "steps", "rng-state", "drafts", "logits")
EVIDENCE_TEXT: dict[str, str] = {
    "tokens": "token ids",
    "steps": "batch rows and engine steps",
    "rng-state": "RNG state",
    "drafts": "draft and acceptance counts",
    "logits": "logits fingerprints",
}

_STRICT = ConfigDict(extra="forbid")
"""Every record refuses keys it does not know (pydantic reads stdlib dataclasses with it)."""

RngStateKind = Literal["philox", "generator"]
"""How an engine's RNG state is named: curand Philox (seed, subsequence, offset, draws), or a
stateful generator (its seed, and the position in its stream as ``offset``)."""


@dataclass(frozen=True)
class Observability:
    """What an engine let specseed see in a run. Token ids are always observed.

    Checks declare the evidence they need; a check whose evidence is missing is reported as
    ``skip`` with the reason, never as ``pass``.
    """

    __pydantic_config__ = _STRICT

    steps: bool
    """Batch rows, engine steps and each request's decoding iteration."""
    rng_state: RngStateKind | None
    """Per-event RNG state, and in which form; None: not observed."""
    drafts: bool
    """Draft tokens proposed and how many were accepted."""
    logits: bool
    """A fingerprint of the target logits row behind each emitted token."""
    notes: str = ""
    """Free text: how the state was observed, or why something is not."""

    def exposes(self, evidence: Evidence) -> bool:
        if evidence == "tokens":
            return True
        if evidence == "rng-state":
            return self.rng_state is not None
        return bool(getattr(self, evidence))

    def missing(self, needs: Iterable[Evidence]) -> list[Evidence]:
        """The evidence in ``needs`` this engine did not expose, in order."""
        return [e for e in needs if not self.exposes(e)]

    @property
    def evidence(self) -> tuple[Evidence, ...]:
        return tuple(e for e in EVIDENCE if self.exposes(e))


FULL_OBSERVABILITY = Observability(steps=True, rng_state="philox", drafts=True, logits=True)
"""What the reference engine exposes (and what 1.0 traces, all written by it, contain)."""
TOKENS_ONLY = Observability(steps=False, rng_state=None, drafts=False, logits=False)


@dataclass(frozen=True)
class SamplingEvent:
    """One sampling kernel row run for one request: the Philox state it was given and used."""

    __pydantic_config__ = _STRICT

    kind: EventKind
    """``target`` (a target logits row), ``accept`` (rejection sampling), ``draft`` (a draft step)."""
    index: int
    """Target row among the request's K + 1 rows, or the draft step; 0 for ``accept``."""
    kernel: str
    """Kernel that ran: a flashinfer function name, or ``argmax`` (greedy, no draws)."""
    kernel_row: int
    """The row of this request in that kernel call (flashinfer's blockIdx.x)."""
    seed: int
    """uint64 seed placed in the engine's seed buffer for this row."""
    subsequence: int
    """uint64 Philox subsequence the kernel used for this row."""
    offset: int
    """uint64 offset of the first draw, as placed in the engine's offset buffer."""
    draws: int
    """32-bit Philox outputs the kernel consumed for this row (0 for argmax)."""


@dataclass(frozen=True)
class AppliedSampling:
    """The sampling parameters an engine's sampler actually received for a row's tokens, as an
    adapter that wraps the sampler saw them (one value per token the call covered; empty where
    the call took none). Optional evidence: most engines do not expose it."""

    __pydantic_config__ = _STRICT

    function: str
    """The wrapped call that received them (e.g. vLLM's ``apply_sampling_constraints``)."""
    temperature: tuple[float, ...]
    top_k: tuple[int, ...] = ()
    top_p: tuple[float, ...] = ()


@dataclass(frozen=True)
class RowRecord:
    """One request's row in one engine step."""

    __pydantic_config__ = _STRICT

    request_id: str
    row: int
    """Position of the request in the step's batch (0-based)."""
    slot: int
    """Engine slot (per-request buffer index) the request occupies."""
    phase: Phase
    decoding_iter: int
    """The request's own iteration count: 0 for the context (prefill) step."""
    drafts_verified: tuple[int, ...]
    """Draft tokens proposed last iteration and verified in this step."""
    accepted: int
    """How many of ``drafts_verified`` were accepted."""
    emitted: tuple[int, ...]
    """Tokens appended to the request's output in this step (accepted drafts + one)."""
    first_position: int
    """Output index of ``emitted[0]`` (0 = the first generated token)."""
    logits_fingerprints: tuple[str, ...]
    """Fingerprint of the target logits row behind each emitted token."""
    drafts_proposed: tuple[int, ...]
    """Draft tokens proposed in this step for the next iteration."""
    events: tuple[SamplingEvent, ...]
    """Sampling events of this row, in the order the kernels ran."""
    discarded: bool = False
    """True where the row ran but its output was thrown away (overlap scheduler's extra step)."""
    applied: AppliedSampling | None = None
    """What the sampler received for this row, where the adapter sees it (left out of the
    JSONL line when None, so traces without it read and write as before)."""


@dataclass(frozen=True)
class StepRecord:
    """One engine step: the scheduled rows in batch order."""

    __pydantic_config__ = _STRICT

    step: int
    phase: Phase
    rows: tuple[RowRecord, ...]


REQUEST_SAMPLING = ("seed", "temperature", "top_k", "top_p", "max_tokens")
"""How a request samples: the fields a scenario's request, the plan's request and the trace's
request all hold, under these names (each step of the chain copies them by name)."""
REQUEST_KNOBS = (
    "min_p",
    "logit_bias",
    "presence_penalty",
    "frequency_penalty",
    "repetition_penalty",
    "stop_token_ids",
    "stop",
    "ignore_eos",
    "logprobs",
    "n",
)
"""The other sampling knobs (OpenAI / vLLM names), copied by name like ``REQUEST_SAMPLING``:
None = unset, the engine's default (an adapter does not send it)."""

PENALTY_KNOBS = ("presence_penalty", "frequency_penalty", "repetition_penalty")
"""Knobs that reshape the distribution by the tokens already emitted."""
FILTER_KNOBS = ("logit_bias", "min_p")
"""Knobs that reshape the distribution by fixed rules (a bias per token, a floor)."""


CHILD_SEPARATOR = "#"
"""Child i > 0 of a request with ``n`` > 1 is the request ``<request>#i`` (scenario names
cannot hold ``#``)."""


def child_id(request_id: str, index: int) -> str:
    """The id of a request's child ``index`` (0 is the request itself)."""
    return request_id if index == 0 else f"{request_id}{CHILD_SEPARATOR}{index}"


def child_seed(seed: int | None, index: int) -> int | None:
    """The seed child ``index`` of a seeded request samples under: seed + index (vLLM's
    parallel sampling, ``ParentRequest``); unseeded children stay unseeded."""
    return None if seed is None else (seed + index) & ((1 << 64) - 1)


@dataclass(frozen=True)
class RequestInfo:
    """A request as the engine received it (after prompt encoding): the plan's request
    (``RequestPlan.received``) with its prompt as token ids."""

    __pydantic_config__ = _STRICT

    request_id: str
    phase: Phase
    prompt_ids: tuple[int, ...]
    seed: int | None
    temperature: float
    top_k: int
    top_p: float
    max_tokens: int
    arrival_step: int
    warmup_batch: int | None = None
    """For warmup requests: which warmup batch (0-based) they belong to; else None."""
    min_p: float | None = None
    logit_bias: tuple[tuple[int, float], ...] | None = None
    """(token id, bias) pairs, sorted by token id."""
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    repetition_penalty: float | None = None
    stop_token_ids: tuple[int, ...] | None = None
    stop: tuple[str, ...] | None = None
    ignore_eos: bool | None = None
    logprobs: int | None = None
    n: int | None = None
    """Children the request asked for; child i > 0 is listed as its own request
    (``child_id``) with ``parent`` set and ``n`` None."""
    parent: str | None = None
    """For child i > 0 of a request with ``n`` > 1: the request's id (its seed is
    ``child_seed``)."""

    def knobs(self) -> dict[str, Any]:
        """The knobs this request set (``REQUEST_KNOBS`` that are not None)."""
        return {k: getattr(self, k) for k in REQUEST_KNOBS if getattr(self, k) is not None}


FinishReason = Literal["stop", "length"]
"""Why a request ended: ``stop`` (an end-of-sequence token, a stop token or string) or
``length`` (``max_tokens``)."""


@dataclass(frozen=True)
class TokenLogprob:
    """The log-probabilities an engine reported for one emitted token."""

    __pydantic_config__ = _STRICT

    logprob: float
    """The chosen token's (natural log)."""
    top: tuple[tuple[int, float], ...] = ()
    """The top-n tokens with theirs, most probable first (``logprobs: n``)."""


@dataclass(frozen=True)
class EngineConfigRecord:
    """The engine settings a run was served with (model.yaml's ``engine`` plus the run's
    overrides), as its header records them. ``options`` are the engine's own options, every
    default written out; the trace layer does not know each engine's options model."""

    __pydantic_config__ = _STRICT

    name: str = "reference"
    device: Literal["cpu", "cuda"] = "cpu"
    max_num_requests: int = 8
    max_draft_len: int = 3
    verification: Literal["rejection", "strict"] = "rejection"
    overlap_scheduler: bool = False
    checkpoint: str | None = None
    draft_checkpoint: str | None = None
    contract: str = "ideal"
    """The RNG contract the audit holds the engine to."""
    options: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class RunHeader:
    """First record of a run: what ran, where and how."""

    __pydantic_config__ = _STRICT

    scenario: str
    run: str
    engine: str
    engine_config: EngineConfigRecord
    """The resolved engine settings of this run (model.yaml plus the run's overrides)."""
    contract: str
    """The RNG contract the engine claims to follow (its rng profile)."""
    requests: tuple[RequestInfo, ...]
    environment: dict[str, str] = field(default_factory=dict)
    observability: Observability = FULL_OBSERVABILITY
    """What the engine exposed in this run."""
    fresh_engine: bool = True
    """True: the run started on a fresh engine (no state left by earlier runs); False: the
    adapter reused an engine instance that served earlier runs of the audit."""
    warmup_batches: tuple[int, ...] = ()
    """Sizes of the warmup batches run before serving, in order."""
    not_served: str | None = None
    """Set when the engine could not serve the run as planned (why); the run has no outputs
    and checks that read it skip with this reason."""
    schema_version: str = TRACE_SCHEMA_VERSION


@dataclass(frozen=True)
class EngineFailure:
    """An exception the engine raised while running."""

    __pydantic_config__ = _STRICT

    step: int
    """Engine step at which it happened (-1 before the first step)."""
    phase: Phase
    batch_size: int
    """Rows in the batch being run when it happened (0 if unknown)."""
    exception: str
    """Exception type name."""
    message: str
    traceback: str = ""
    """The full stack trace as Python prints it ("" where not recorded: traces before 1.2)."""

    @property
    def where(self) -> str:
        """When it happened, as a message says it: "at step 3 (decode, batch of 4)", or
        "before the first step (prefill)" (step -1; a batch of 0 rows is not known)."""
        batch = f", batch of {self.batch_size}" if self.batch_size > 0 else ""
        at = f"at step {self.step}" if self.step >= 0 else "before the first step"
        return f"{at} ({self.phase}{batch})"


@dataclass(frozen=True)
class RunEnd:
    """Last record of a run: the outputs, or the failure that stopped it."""

    __pydantic_config__ = _STRICT

    outputs: dict[str, tuple[int, ...]]
    """Generated tokens per scenario request id (prior and warmup traffic excluded)."""
    failure: EngineFailure | None = None
    seconds: float = 0.0
    finish_reasons: dict[str, FinishReason] = field(default_factory=dict)
    """Why each scenario request ended, where the engine said (empty before 1.3)."""
    logprobs: dict[str, tuple[TokenLogprob, ...]] = field(default_factory=dict)
    """Per scenario request that asked for ``logprobs``: what the engine reported for each
    emitted token, in order (absent where it reported none)."""
    refused: str | None = None
    """The engine refused a knob the run's requests set, in its own words: the run has no
    outputs and every check that reads it skips quoting this."""


@dataclass(frozen=True)
class RunTrace:
    """A whole run held in memory: header, steps, end."""

    header: RunHeader
    steps: tuple[StepRecord, ...]
    end: RunEnd

    @property
    def name(self) -> str:
        return self.header.run

    @property
    def failed(self) -> bool:
        return self.end.failure is not None

    @property
    def unserved(self) -> str | None:
        """Why the run was not served (None: it was): the engine could not take its settings,
        or refused a knob its requests set (in the engine's words)."""
        if self.header.not_served is not None:
            return self.header.not_served
        if self.end.refused is not None:
            return f"the engine refused a sampling knob: {self.end.refused}"
        return None

    @cached_property
    def _rows_by_request(self) -> dict[str, list[tuple[StepRecord, RowRecord]]]:
        # Built once per trace: checks ask for every request's rows, and scanning every step
        # per request made them quadratic in requests.
        index: dict[str, list[tuple[StepRecord, RowRecord]]] = {}
        for step in self.steps:
            for row in step.rows:
                index.setdefault(row.request_id, []).append((step, row))
        return index

    @cached_property
    def _requests_by_id(self) -> dict[str, RequestInfo]:
        index: dict[str, RequestInfo] = {}
        for info in self.header.requests:
            index.setdefault(info.request_id, info)
        return index

    def rows_of(self, request_id: str) -> Iterator[tuple[StepRecord, RowRecord]]:
        """The rows of one request, in step order, with their steps."""
        yield from self._rows_by_request.get(request_id, ())

    def request(self, request_id: str) -> RequestInfo:
        info = self._requests_by_id.get(request_id)
        if info is None:
            raise KeyError(request_id)
        return info

    @cached_property
    def _derived(self) -> dict[object, Any]:
        return {}

    def derived(self, key: object, build: Callable[[], T]) -> T:
        """``build()``, computed once per trace and ``key``: an index a check reads many
        times (a trace is never modified, so the value never goes stale)."""
        if key not in self._derived:
            self._derived[key] = build()
        return self._derived[key]


# -- JSONL ------------------------------------------------------------------------------


_HEADER = TypeAdapter(RunHeader)
_STEP = TypeAdapter(StepRecord)
_END = TypeAdapter(RunEnd)
_RECORDS: dict[str, TypeAdapter[Any]] = {"header": _HEADER, "step": _STEP, "end": _END}
"""Each line's ``record`` kind and the record it holds."""


def _record_line(kind: str, record: Any) -> str:
    # Python mode, then json.dumps: the same JSON the format has always had (pydantic's JSON
    # mode would write a non-finite float as null).
    payload = _RECORDS[kind].dump_python(record)
    if kind == "step":
        for row in payload["rows"]:
            if row.get("applied", 0) is None:
                del row["applied"]
    elif kind == "header":
        # Unset knobs are left out: a trace without knobs reads as it did before 1.3.
        for request in payload["requests"]:
            for name in (*REQUEST_KNOBS, "parent"):
                if request.get(name, 0) is None:
                    del request[name]
    else:
        for name in ("finish_reasons", "logprobs"):
            if not payload.get(name, True):
                del payload[name]
        if payload.get("refused", 0) is None:
            del payload["refused"]
    payload["record"] = kind
    return json.dumps(payload, separators=(",", ":"), sort_keys=False)


def trace_json_schema() -> dict[str, Any]:
    """JSON Schema of one line of a JSONL trace: a header, a step or an end record."""
    defs: dict[str, Any] = {}
    lines = []
    for kind, adapter in _RECORDS.items():
        schema = adapter.json_schema(ref_template="#/$defs/{model}")
        defs.update(schema.pop("$defs", {}))
        schema["properties"]["record"] = {"const": kind, "description": "The record's kind."}
        schema["required"] = ["record", *schema.get("required", ())]
        name = schema.get("title", kind)
        defs[name] = schema
        lines.append({"$ref": f"#/$defs/{name}"})
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": f"specseed trace line (schema {TRACE_SCHEMA_VERSION})",
        "description": "One line of a JSONL trace: the header first, a step per engine step, "
        "then the end.",
        "oneOf": lines,
        "$defs": defs,
    }


class TraceWriter:
    """Writes one run's records to a JSONL file as they happen (flushed per line).

    The file is created with its first record, so a run that never starts leaves no empty
    file. Any ``OSError`` (disk full, a file where the folder should be) becomes a
    ``TraceWriteError`` naming the file. ``inside``: the folder specseed owns that ``path``
    lies in (a bundle): the file is then created anew there, never through a symlink
    (``core.files.create_inside``).
    """

    def __init__(self, path: Path, *, inside: Path | None = None) -> None:
        self.path = path
        self.inside = inside
        self._file: IO[str] | None = None
        self._closed = False

    def _open(self) -> IO[str]:
        if self.inside is not None:
            from specseed.core.files import create_inside

            relative = self.path.relative_to(self.inside).parts
            return open(create_inside(self.inside, relative), "w", encoding="utf-8")
        return self.path.open("w", encoding="utf-8")

    def _write(self, line: str) -> None:
        assert not self._closed, "trace writer already closed"
        if self._file is None and self.inside is None:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                self.abandon()
                raise TraceWriteError(
                    f"cannot write the trace {self.path}: cannot create the folder "
                    f"{self.path.parent}: {exc.strerror or exc}"
                ) from exc
        try:
            if self._file is None:
                self._file = self._open()
            # Secrets out at the point the text leaves the process (an engine's error text
            # may echo a key).
            self._file.write(scrub_text(line, by_name=False) + "\n")
            self._file.flush()
        except OSError as exc:
            self.abandon()
            raise TraceWriteError(
                f"cannot write the trace {self.path}: {exc.strerror or exc}"
            ) from exc

    def header(self, header: RunHeader) -> None:
        self._write(_record_line("header", header))

    def step(self, step: StepRecord) -> None:
        self._write(_record_line("step", step))

    def end(self, end: RunEnd) -> None:
        self._write(_record_line("end", end))
        self.close()

    def close(self) -> None:
        self._closed = True
        if self._file is not None:
            file, self._file = self._file, None
            try:
                file.close()
            except OSError as exc:  # the last buffered bytes did not fit
                raise TraceWriteError(
                    f"cannot write the trace {self.path}: {exc.strerror or exc}"
                ) from exc

    def abandon(self) -> None:
        """Close without raising (after a write already failed)."""
        self._closed = True
        if self._file is not None:
            file, self._file = self._file, None
            with contextlib.suppress(OSError):
                file.close()


_LEGACY_ENGINE_CONFIG = ("1.0", "1.1")
"""Schema versions whose ``engine_config`` held the reference engine's own keys (model_seed,
rng_profile, defects) among the shared ones, and no ``contract``."""


def _legacy_engine_config(d: dict[str, Any], contract: object) -> dict[str, Any]:
    """A 1.0/1.1 ``engine_config`` in the current shape: the engine's own keys moved under
    ``options``, the contract taken from the header."""
    shared = set(EngineConfigRecord.__dataclass_fields__)
    config = {k: v for k, v in d.items() if k in shared}
    options = {k: v for k, v in d.items() if k not in shared}
    config["options"] = {**options, **dict(d.get("options") or {})}
    config.setdefault("contract", contract)
    return config


def _header(d: dict[str, Any]) -> RunHeader:
    version = str(d.get("schema_version", ""))
    if version.split(".")[0] != TRACE_SCHEMA_VERSION.split(".")[0]:
        raise ValueError(
            f"trace schema version {d.get('schema_version')!r} is not readable by this "
            f"specseed (reads {TRACE_SCHEMA_VERSION})"
        )
    if version in _LEGACY_ENGINE_CONFIG and isinstance(d.get("engine_config"), dict):
        d = {**d, "engine_config": _legacy_engine_config(d["engine_config"], d.get("contract"))}
    return _HEADER.validate_python(d)


def _step(d: dict[str, Any]) -> StepRecord:
    return _STEP.validate_python(d)


def _end(d: dict[str, Any]) -> RunEnd:
    return _END.validate_python(d)


def read_trace(lines: Iterable[str]) -> RunTrace:
    """Rebuild a run from its JSONL lines. A trace cut short by a crash gets a synthetic end."""
    header: RunHeader | None = None
    steps: list[StepRecord] = []
    end: RunEnd | None = None
    torn: str | None = None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        if torn is not None:
            raise ValueError(torn)
        try:
            payload = json.loads(line)
        except json.JSONDecodeError as exc:
            # Only the last line may be cut (disk full, a killed writer): then the trace is
            # truncated there. A bad line followed by more lines is a corrupt file.
            torn = f"line {number}: not a JSON record ({exc.msg})"
            continue
        if not isinstance(payload, dict):
            raise ValueError(
                f"line {number}: a record is a JSON object, not {type(payload).__name__}"
            )
        kind = payload.pop("record", None)
        if kind == "header":
            header = _header(payload)
        elif kind == "step":
            steps.append(_step(payload))
        elif kind == "end":
            end = _end(payload)
        else:
            raise ValueError(f"line {number}: unknown record kind {kind!r}")
    if header is None:
        raise ValueError("trace has no header record")
    if end is None:
        last = steps[-1].step if steps else -1
        why = "trace ends early" + (" with a cut line" if torn is not None else "")
        end = RunEnd(
            outputs={},
            failure=EngineFailure(last, "scenario", 0, "TraceTruncated", why),
        )
    return RunTrace(header=header, steps=tuple(steps), end=end)


def load_trace(path: Path) -> RunTrace:
    """Read a run's JSONL trace file."""
    with path.open(encoding="utf-8") as handle:
        return read_trace(handle)


class TraceRecorder:
    """Collects a run's records in memory and streams them to an optional ``TraceWriter``.

    Adapters record steps with :meth:`step` and say where they are with :meth:`at`, so that
    an exception can be recorded with the step, phase and batch size it happened in.
    """

    def __init__(self, writer: TraceWriter | None = None) -> None:
        self._writer = writer
        self.path: Path | None = writer.path if writer is not None else None
        """The trace file (None: the run is kept in memory only)."""
        self.write_error: TraceWriteError | None = None
        """Why the trace file stopped being written (None: it was not, or fully written).
        The run itself goes on in memory: a failing disk is not an engine failure."""
        self.written_steps = 0
        """Step records that reached the trace file."""
        self._header: RunHeader | None = None
        self._steps: list[StepRecord] = []
        self._end: RunEnd | None = None
        self.position: tuple[int, Phase, int] = (-1, "warmup", 0)
        """(step, phase, batch size) the engine is at, as last reported by the adapter."""
        self.finish_reasons: dict[str, FinishReason] = {}
        self.logprobs: dict[str, tuple[TokenLogprob, ...]] = {}

    @property
    def steps(self) -> tuple[StepRecord, ...]:
        return tuple(self._steps)

    @property
    def has_header(self) -> bool:
        return self._header is not None

    @property
    def ended(self) -> bool:
        return self._end is not None

    @property
    def trace(self) -> RunTrace:
        """The run as recorded, once it has ended."""
        if self._header is None or self._end is None:
            raise RuntimeError("the run has not ended")
        return RunTrace(header=self._header, steps=tuple(self._steps), end=self._end)

    def at(self, step: int, phase: Phase, batch_size: int) -> None:
        """Note where the engine is (used if the run fails before the next note)."""
        self.position = (step, phase, batch_size)

    def emitted_outputs(self) -> dict[str, tuple[int, ...]]:
        """Tokens of each scenario request, from the recorded steps (kept rows only)."""
        outputs: dict[str, list[int]] = {}
        for step in self._steps:
            for row in step.rows:
                if row.phase == "scenario" and not row.discarded:
                    outputs.setdefault(row.request_id, []).extend(row.emitted)
        return {k: tuple(v) for k, v in outputs.items()}

    def _to_file(self, write: Callable[[TraceWriter], None]) -> bool:
        if self._writer is None:
            return False
        try:
            write(self._writer)
        except TraceWriteError as exc:
            self.write_error = exc
            self._writer.abandon()
            self._writer = None
            return False
        return True

    def header(self, header: RunHeader) -> None:
        self._header = header
        self._to_file(lambda w: w.header(header))

    def step(self, step: StepRecord) -> None:
        self._steps.append(step)
        if self._to_file(lambda w: w.step(step)):
            self.written_steps += 1

    def finish(
        self,
        request_id: str,
        reason: FinishReason | None,
        logprobs: tuple[TokenLogprob, ...] | None = None,
    ) -> None:
        """Note how a scenario request ended and the log-probabilities the engine reported
        for its tokens (None: not reported); the end record carries them."""
        if reason is not None:
            self.finish_reasons[request_id] = reason
        if logprobs is not None:
            self.logprobs[request_id] = logprobs

    def end(self, end: RunEnd) -> RunTrace:
        if self._header is None:
            raise RuntimeError("a run ended before its header was recorded")
        if not end.finish_reasons and not end.logprobs and end.refused is None:
            outputs = end.outputs
            end = replace(
                end,
                finish_reasons={k: v for k, v in self.finish_reasons.items() if k in outputs},
                logprobs={k: v for k, v in self.logprobs.items() if k in outputs},
            )
        self._end = end
        self._to_file(lambda w: w.end(end))
        return self.trace

    def close(self) -> None:
        """Close the trace file (idempotent); a run without an end record stays truncated."""
        self._to_file(lambda w: w.close())
