"""Pydantic models of model.yaml and of scenario files (the single source of their JSON Schema).

Every model forbids unknown keys. Field descriptions are the reference documentation: the
tables of docs/model-yaml.md and docs/scenarios.md and ``specseed schema`` are generated from
them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    GetJsonSchemaHandler,
    PrivateAttr,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import core_schema

from specseed.core.defects import DEFECT_IDS
from specseed.core.wording import did_you_mean, one_of
from specseed.engine_adapters.contracts import CONTRACT_NAMES, contract_names
from specseed.engine_adapters.registry import engine_names

UINT64_MAX = (1 << 64) - 1
INT64_MIN = -(1 << 63)
DEFAULT_DISTRIBUTION_SAMPLES = 200
TOKEN_ID_MAX = 2**31 - 1
"""Largest token id or top_k: engines hold them as int32."""
MAX_PROMPT_LENGTH = 32_768
"""Longest prompt a scenario may hold (ids, or characters of text); the reference engine's
KV capacity is far smaller, and a longer prompt is a typo or an attack, not a test."""
MAX_SERVED_REQUESTS = 65_536
"""Most requests one run may serve, distribution copies included (bounds plan memory)."""
MAX_REQUESTS = 4096
"""Most requests a scenario defines (the library's largest defines 16)."""
"""Copies per request when a scenario's ``distribution`` names no ``samples``."""

MIN_TEMPERATURE = 1e-5
"""Smallest non-zero temperature. Engines divide float32 logits by it (largest float32:
3.4e38): at 1e-38 even the tiny model's logits overflow to inf and the softmax is NaN. 1e-5
leaves room for logits up to 3.4e33 (vLLM clamps anything below 1e-2)."""
MIN_TOP_P = 2.0**-126
"""Smallest top_p (the smallest normal float32, 1.18e-38). The kernels hold top_p as float32
and keep a token while the mass above it is below top_p: a smaller value becomes 0 (or a
subnormal that GPUs flush to 0) and keeps no token at all."""
MAX_NUM_REQUESTS_LIMIT = 1024
"""The largest ``max_num_requests`` model.yaml or a run may set."""
MAX_WARMUP_BATCH = 4 * MAX_NUM_REQUESTS_LIMIT
"""Largest warmup batch (4 x the largest max_num_requests): a warmup batch runs all at once,
so its size is memory the engine allocates."""


COMPARISON_CHECK_IDS: tuple[str, ...] = (
    "run-to-run",
    "uptime-invariance",
    "batch-invariance",
    "position-invariance",
    "overlap-invariance",
    "greedy-spec-equivalence",
    "losslessness",
    "knob-equivalence",
)
"""Ids of specseed's comparison checks, the ones ``expect`` may name, in registration order.

Data, not a lookup: the checks sit in a layer above this one. ``tests/checks/test_registry.py``
holds this tuple equal to the registry's own comparison checks, so a new one must be listed
here. Comparison checks that plugins register reach validation through the context
(``COMPARISON_IDS_CONTEXT``)."""

COMPARISON_IDS_CONTEXT = "comparison_ids"
"""Validation-context key: every registered comparison check id (the built-in ones and those
plugins register), given by the layer that knows the registry. Without it, ``expect`` takes
``COMPARISON_CHECK_IDS``."""


def comparison_ids(context: dict[str, Any] | None = None) -> tuple[str, ...]:
    """The comparison ids ``expect`` may name under a validation ``context``."""
    known = (context or {}).get(COMPARISON_IDS_CONTEXT)
    return tuple(known) if known else COMPARISON_CHECK_IDS


def _known_comparison(value: str, info: ValidationInfo) -> str:
    return one_of("check", value, comparison_ids(info.context))


class _ComparisonEnum:
    """The JSON Schema of a comparison id: an enum of the built-in ones (``json_schemas``
    lists the registered ones instead)."""

    def __get_pydantic_json_schema__(
        self, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return {"enum": list(COMPARISON_CHECK_IDS), "type": "string"}


ComparisonCheck = Annotated[str, AfterValidator(_known_comparison), _ComparisonEnum()]
"""A check that compares runs; scenarios name them under ``expect``."""

Slug = Annotated[
    str,
    Field(pattern=r"^[a-z0-9][a-z0-9_.-]*$", max_length=64),
]


class StrictModel(BaseModel):
    """Base: unknown keys are errors, values are immutable after validation."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def _known_defect(value: str) -> str:
    return one_of("defect", value, DEFECT_IDS)


# -- model.yaml ---------------------------------------------------------------------------


class EngineConfig(StrictModel):
    """The ``engine:`` section of model.yaml: keys every engine shares, and ``options``, the
    engine's own keys (validated against the model the engine declares)."""

    name: str = Field("reference", description="Engine adapter (`specseed engines` lists them).")
    device: Literal["cpu", "cuda"] = Field("cpu", description="Where the engine runs.")
    max_num_requests: int = Field(
        8, ge=1, le=1024, description="Most requests the scheduler runs at once."
    )
    max_draft_len: int = Field(
        3, ge=0, le=16, description="Draft tokens per iteration (K); 0 = no speculation."
    )
    verification: Literal["rejection", "strict"] = Field(
        "rejection",
        description="How non-greedy drafts are verified: rejection sampling "
        "(chain_speculative_sampling) or strict token match against sampled target tokens.",
    )
    overlap_scheduler: bool = Field(
        False, description="Prepare step N+1 before step N's results are applied."
    )
    contract: str = Field(
        "ideal",
        description="RNG layout the audit holds the engine to: "
        + " | ".join(CONTRACT_NAMES)
        + " (and contracts other packages register)",
    )
    checkpoint: Path | None = Field(
        None,
        description="Local Hugging Face Llama checkpoint directory (config.json + safetensors); "
        "null = the engine's default (the reference engine's built-in tiny model). Relative "
        "to model.yaml.",
    )
    draft_checkpoint: Path | None = Field(
        None,
        description="Local EAGLE3 draft checkpoint directory; null = the engine's default (the "
        "reference engine derives a draft head from the target). Relative to model.yaml.",
    )
    options: dict[str, Any] = Field(
        default_factory=dict,
        description="The engine's own options (see `specseed schema` and `specseed engines`); "
        "validated against the options model of engine.name.",
    )

    @field_validator("name")
    @classmethod
    def _known_engine(cls, value: str) -> str:
        return one_of("engine", value, engine_names())

    @field_validator("contract")
    @classmethod
    def _known_contract(cls, value: str) -> str:
        return one_of("contract", value, contract_names())


CHECK_IDS_CONTEXT = "check_ids"
"""Validation-context key: the registered check ids (the checks layer sits above this one)."""


def _known_check(value: str, info: ValidationInfo) -> str:
    known = (info.context or {}).get(CHECK_IDS_CONTEXT)
    if known and value not in known:
        fix = did_you_mean(value, known, "See `specseed checks`.")
        raise ValueError(f"unknown check {value!r}. {fix}")
    return value


SKIPPED_BY_MODEL_YAML = "skipped by model.yaml checks.skip"


class ChecksConfig(StrictModel):
    """The ``checks:`` section of model.yaml."""

    skip: list[Annotated[str, AfterValidator(_known_check)]] = Field(
        default_factory=list, description="Check ids not to run (reported as skip)."
    )
    _asked: tuple[str, ...] | None = PrivateAttr(default=None)
    """The only checks a caller asked for (the Python API's ``checks=``), when it did."""

    def only(self, checks: Sequence[str], every: Iterable[str]) -> ChecksConfig:
        """This section with every check of ``every`` but ``checks`` skipped too; each says
        it was not asked for, not that model.yaml skips it."""
        skip = sorted({*self.skip, *(c for c in every if c not in checks)})
        narrowed = self.model_copy(update={"skip": skip})
        narrowed._asked = tuple(checks)
        return narrowed

    def skip_reasons(self) -> dict[str, str]:
        """Each skipped check id with the reason its findings give."""
        asked = self._asked
        return {
            check: (
                f"not among the checks asked for ({', '.join(asked)})"
                if asked is not None and check not in asked
                else SKIPPED_BY_MODEL_YAML
            )
            for check in self.skip
        }


class AuditConfig(StrictModel):
    """model.yaml: the engine to audit and the scenarios to replay."""

    engine: EngineConfig = Field(default_factory=EngineConfig)  # type: ignore[arg-type]
    scenarios: list[str] = Field(
        default_factory=lambda: ["builtin"],
        min_length=1,
        description='"builtin" (the whole library), library scenario names, or paths to '
        "scenario YAML files relative to model.yaml.",
    )
    checks: ChecksConfig = Field(default_factory=ChecksConfig)


# -- scenarios ----------------------------------------------------------------------------

TEMPERATURE_HELP = (
    f"0 = greedy; otherwise at least {MIN_TEMPERATURE:g} (logits / temperature is float32)."
)
TOP_P_HELP = (
    f"1.0 = no top-p filter; at least {MIN_TOP_P:.3g} (the smallest normal float32: the kernels "
    "hold top_p as float32)."
)


def _check_temperature(value: float) -> float:
    if 0.0 < value < MIN_TEMPERATURE:
        raise ValueError(
            f"temperature must be 0 (greedy) or at least {MIN_TEMPERATURE:g}: engines divide "
            "float32 logits by it and a smaller one overflows them to inf (NaN probabilities)"
        )
    return value


def _check_top_p(value: float) -> float:
    if 0.0 < value < MIN_TOP_P:
        raise ValueError(
            f"top_p must be at least {MIN_TOP_P:.3g}, the smallest normal float32: the kernels "
            "hold top_p as float32, where a smaller value is 0 and keeps no token"
        )
    return value


# -- the sampling knobs beyond the five above (OpenAI / vLLM names) ---------------------------

MAX_LOGIT_BIAS = 1024
"""Most ``logit_bias`` entries one request may carry (OpenAI documents no limit for the
completions API; every entry is a token the sampler must touch at every position)."""
MAX_STOP_TOKEN_IDS = 64
"""Most ``stop_token_ids`` one request may carry."""
MAX_STOP_STRINGS = 8
"""Most ``stop`` strings one request may carry (OpenAI's completions API takes 4)."""
MAX_STOP_LENGTH = 128
"""Longest ``stop`` string, in characters."""
MAX_LOGPROBS = 20
"""Largest ``logprobs`` (top-n): vLLM's default ``max_logprobs``."""
MAX_N = 16
"""Largest ``n`` (children of one request)."""
MIN_REPETITION_PENALTY = 0.01
MAX_REPETITION_PENALTY = 100.0
"""``repetition_penalty`` divides positive float32 logits and multiplies negative ones: outside
[0.01, 100] a logit of the tiny model is pushed past every other by orders of magnitude and the
request tests nothing but the overflow."""

KNOB_HELP: dict[str, str] = {
    "min_p": "Keep only tokens whose probability is at least min_p x the most probable "
    "token's (vLLM `min_p`); 0 = off. 0 or at least the smallest normal float32.",
    "logit_bias": f"Token id -> bias in [-100, 100] added to its logit before sampling "
    f"(OpenAI `logit_bias`); at most {MAX_LOGIT_BIAS} entries.",
    "presence_penalty": "Subtracted from the logit of every token the output already holds "
    "(OpenAI `presence_penalty`), from -2 to 2.",
    "frequency_penalty": "Subtracted from a token's logit once per time the output holds it "
    "(OpenAI `frequency_penalty`), from -2 to 2.",
    "repetition_penalty": "Divides positive (multiplies negative) logits of tokens in the "
    f"prompt or output (vLLM `repetition_penalty`); 1 = off; {MIN_REPETITION_PENALTY:g} to "
    f"{MAX_REPETITION_PENALTY:g}.",
    "stop_token_ids": f"Token ids that end the request when generated, kept in the output "
    f"(vLLM `stop_token_ids`); at most {MAX_STOP_TOKEN_IDS}.",
    "stop": f"Strings that end the request once the output text contains one (OpenAI "
    f"`stop`); needs an engine that decodes text; at most {MAX_STOP_STRINGS}, each 1 to "
    f"{MAX_STOP_LENGTH} characters.",
    "ignore_eos": "true: do not stop at the model's end-of-sequence token (vLLM `ignore_eos`).",
    "logprobs": f"Report the chosen token's log-probability and the top-n (OpenAI "
    f"`logprobs`), 0 to {MAX_LOGPROBS}; 0 = the chosen token's only.",
    "n": f"Completions generated for the request (OpenAI `n`), 1 to {MAX_N}; child i > 0 is "
    "traced as `<request>#i`.",
}
"""Each knob's help text: the field descriptions of scenarios' requests and defaults."""

KNOB_NAMES: tuple[str, ...] = tuple(KNOB_HELP)
"""The knobs a request may set beyond seed, temperature, top_k, top_p and max_tokens: unset
(null) means the engine's default, and an adapter does not send it; set, it is always sent."""


def _check_min_p(value: float | None) -> float | None:
    if value is not None and 0.0 < value < MIN_TOP_P:
        raise ValueError(
            f"min_p must be 0 or at least {MIN_TOP_P:.3g}, the smallest normal float32: "
            "engines hold min_p as float32, where a smaller value is 0 (no filter)"
        )
    return value


def _check_stop(value: str | list[str] | None) -> list[str] | None:
    if value is None:
        return None
    strings = [value] if isinstance(value, str) else list(value)
    if len(strings) > MAX_STOP_STRINGS:
        raise ValueError(f"stop holds {len(strings)} strings; at most {MAX_STOP_STRINGS}")
    for text in strings:
        if not 1 <= len(text) <= MAX_STOP_LENGTH:
            raise ValueError(
                f"a stop string must be 1 to {MAX_STOP_LENGTH} characters long, not {len(text)}"
            )
    return strings


TokenIdField = Annotated[int, Field(ge=0, le=TOKEN_ID_MAX)]
BiasValue = Annotated[float, Field(ge=-100.0, le=100.0)]
Penalty = Annotated[float, Field(ge=-2.0, le=2.0)]


class SamplingKnobs(StrictModel):
    """The knobs both a request and a scenario's defaults may set (unset: the engine's
    default, not sent)."""

    min_p: float | None = Field(None, ge=0.0, le=1.0, description=KNOB_HELP["min_p"])
    logit_bias: dict[TokenIdField, BiasValue] | None = Field(
        None, description=KNOB_HELP["logit_bias"]
    )
    presence_penalty: Penalty | None = Field(None, description=KNOB_HELP["presence_penalty"])
    frequency_penalty: Penalty | None = Field(None, description=KNOB_HELP["frequency_penalty"])
    repetition_penalty: float | None = Field(
        None,
        ge=MIN_REPETITION_PENALTY,
        le=MAX_REPETITION_PENALTY,
        description=KNOB_HELP["repetition_penalty"],
    )
    stop_token_ids: list[TokenIdField] | None = Field(
        None, max_length=MAX_STOP_TOKEN_IDS, description=KNOB_HELP["stop_token_ids"]
    )
    stop: list[str] | None = Field(None, description=KNOB_HELP["stop"])
    ignore_eos: bool | None = Field(None, description=KNOB_HELP["ignore_eos"])
    logprobs: int | None = Field(None, ge=0, le=MAX_LOGPROBS, description=KNOB_HELP["logprobs"])
    n: int | None = Field(None, ge=1, le=MAX_N, description=KNOB_HELP["n"])

    @field_validator("min_p")
    @classmethod
    def _min_p_in_float32(cls, value: float | None) -> float | None:
        return _check_min_p(value)

    @field_validator("stop", mode="before")
    @classmethod
    def _stop_bounded(cls, value: Any) -> Any:
        # One string is one stop string (as the OpenAI API takes it).
        return [value] if isinstance(value, str) else value

    @field_validator("stop")
    @classmethod
    def _stop_strings(cls, value: list[str] | None) -> list[str] | None:
        return _check_stop(value)

    @field_validator("logit_bias", mode="before")
    @classmethod
    def _logit_bias_bounded(cls, value: Any) -> Any:
        # Bounded before each entry is validated: a huge map costs nothing to refuse.
        if isinstance(value, dict) and len(value) > MAX_LOGIT_BIAS:
            raise ValueError(f"logit_bias holds {len(value)} entries; at most {MAX_LOGIT_BIAS}")
        return value

    def knobs(self) -> dict[str, Any]:
        """The knobs this model sets (not None)."""
        return {name: getattr(self, name) for name in KNOB_NAMES if getattr(self, name) is not None}


class RequestDefaults(SamplingKnobs):
    """Values a scenario's requests take unless they set their own."""

    seed: int | None = Field(None, ge=INT64_MIN, le=UINT64_MAX)
    temperature: float = Field(1.0, ge=0.0, le=100.0, description=TEMPERATURE_HELP)
    top_k: int = Field(0, ge=0, le=TOKEN_ID_MAX)
    top_p: float = Field(1.0, gt=0.0, le=1.0, description=TOP_P_HELP)
    max_tokens: int = Field(16, ge=1, le=4096)

    @field_validator("temperature")
    @classmethod
    def _temperature_in_float32(cls, value: float) -> float:
        return _check_temperature(value)

    @field_validator("top_p")
    @classmethod
    def _top_p_in_float32(cls, value: float) -> float:
        return _check_top_p(value)


class RequestSpec(SamplingKnobs):
    """One request of a scenario. Unset sampling fields come from the scenario's defaults."""

    prompt: list[Annotated[int, Field(ge=0, le=TOKEN_ID_MAX)]] | str = Field(
        max_length=MAX_PROMPT_LENGTH,
        description=f"Prompt token ids, or text (encoded by the engine's tokenizer); at most "
        f"{MAX_PROMPT_LENGTH} ids or characters.",
    )
    seed: int | None = Field(
        None,
        ge=INT64_MIN,
        le=UINT64_MAX,
        description="SamplingParams.seed: a uint64, or an int64 whose bits are used; null = unseeded.",
    )
    temperature: float | None = Field(None, ge=0.0, le=100.0, description=TEMPERATURE_HELP)
    top_k: int | None = Field(None, ge=0, le=TOKEN_ID_MAX, description="0 = no top-k filter.")
    top_p: float | None = Field(None, gt=0.0, le=1.0, description=TOP_P_HELP)
    max_tokens: int | None = Field(None, ge=1, le=4096)

    @field_validator("temperature")
    @classmethod
    def _temperature_in_float32(cls, value: float | None) -> float | None:
        return None if value is None else _check_temperature(value)

    @field_validator("top_p")
    @classmethod
    def _top_p_in_float32(cls, value: float | None) -> float | None:
        return None if value is None else _check_top_p(value)

    @field_validator("prompt")
    @classmethod
    def _non_empty(cls, value: list[int] | str) -> list[int] | str:
        if len(value) == 0:
            raise ValueError("the prompt is empty")
        return value

    def seed_was_set(self) -> bool:
        return "seed" in self.model_fields_set


# [0-9], not \d: \d also matches digits of other scripts, which int() then accepts.
_WARMUP_SIZE = re.compile(r"^max(\+([0-9]+))?$")
MAX_WARMUP_EXTRA = MAX_WARMUP_BATCH - MAX_NUM_REQUESTS_LIMIT
"""Largest N in "max+N": max+N stays within MAX_WARMUP_BATCH for any max_num_requests."""


def _warmup_size(size: int | str) -> int | str:
    if isinstance(size, int):
        if not 1 <= size <= MAX_WARMUP_BATCH:
            raise ValueError(
                f"warmup batch size {size} must be from 1 to {MAX_WARMUP_BATCH} "
                "(a warmup batch runs at once: its size is memory)"
            )
        return size
    match = _WARMUP_SIZE.match(size)
    if match is None:
        raise ValueError(f'warmup batch {size!r}: write a number, "max" or "max+N"')
    # Compare digit counts first: int() of a huge digit string is itself slow.
    extra = match.group(2) or "0"
    if len(extra) > 6 or int(extra) > MAX_WARMUP_EXTRA:
        raise ValueError(
            f"warmup batch {size!r}: N in max+N must be at most {MAX_WARMUP_EXTRA}, "
            f"so that no warmup batch exceeds {MAX_WARMUP_BATCH}"
        )
    return size


WarmupBatch = Annotated[
    int | str,
    AfterValidator(_warmup_size),
    Field(
        description=f'A batch size from 1 to {MAX_WARMUP_BATCH}, or "max" / "max+N" with N up '
        f"to {MAX_WARMUP_EXTRA} (relative to max_num_requests)."
    ),
]


Loc = tuple[int | str, ...]


class CrossReferenceError(ValueError):
    """Names in a scenario that point at nothing; one (field path, message) per offending item.

    The loader turns each into its own problem at the line of that item.
    """

    def __init__(self, problems: list[tuple[Loc, str]]) -> None:
        super().__init__("; ".join(message for _, message in problems))
        self.problems = problems


class PriorTraffic(StrictModel):
    """Ordinary requests the engine serves, one batch, before the scenario's requests."""

    requests: int = Field(ge=1, le=256, description="How many requests.")
    max_tokens: int = Field(8, ge=1, le=256)
    seeded: bool = Field(False, description="Give them seeds (1000 + i) or leave them unseeded.")


class EngineOverrides(StrictModel):
    """Engine settings a run changes for itself."""

    max_num_requests: int | None = Field(None, ge=1, le=MAX_NUM_REQUESTS_LIMIT)
    max_draft_len: int | None = Field(None, ge=0, le=16)
    verification: Literal["rejection", "strict"] | None = None
    overlap_scheduler: bool | None = None


class RunSpec(StrictModel):
    """One way to serve the scenario's requests."""

    name: Slug
    requests: list[str] = Field(
        min_length=1,
        description="Request names in submission order: requests that arrive at the same "
        "step take batch rows in this order.",
    )
    arrivals: dict[str, Annotated[int, Field(ge=0, le=10_000)]] = Field(
        default_factory=dict, description="Engine step at which a request arrives (default 0)."
    )
    warmup: list[WarmupBatch] = Field(
        default_factory=list,
        max_length=64,
        description="Warmup batches (at most 64) run before serving; sizes may exceed "
        "max_num_requests, up "
        f"to {MAX_WARMUP_BATCH} (4 x the largest max_num_requests, {MAX_NUM_REQUESTS_LIMIT}).",
    )
    prior_traffic: PriorTraffic | None = Field(
        None, description="Traffic served before the scenario (engine uptime)."
    )
    engine: EngineOverrides = Field(default_factory=EngineOverrides)  # type: ignore[arg-type]
    baseline_of: Slug | None = Field(
        None,
        description="This run is the K = 0 baseline of the named run (the `losslessness` "
        "check): served with max_draft_len 0, its distribution copies seeded after the other "
        "run's (seed + samples + i), so both arms are independent samples.",
    )

    @model_validator(mode="before")
    @classmethod
    def _baseline_without_speculation(cls, data: Any) -> Any:
        # A baseline is plain decoding by definition: max_draft_len 0 unless written, and
        # anything else is a contradiction, not a setting.
        if not isinstance(data, dict) or data.get("baseline_of") is None:
            return data
        engine = data.get("engine") or {}
        if not isinstance(engine, dict):
            return data
        drafts = engine.get("max_draft_len", 0)
        if drafts not in (0, None):
            raise ValueError(
                f"a baseline run (baseline_of) serves without speculation, but it sets "
                f"max_draft_len {drafts}. Remove engine.max_draft_len or set it to 0."
            )
        return {**data, "engine": {**engine, "max_draft_len": 0}}

    @model_validator(mode="after")
    def _consistent(self) -> RunSpec:
        problems: list[tuple[Loc, str]] = []
        for index, request in enumerate(self.requests):
            if request in self.requests[:index]:
                problems.append(
                    (("requests", index), f"request {request!r} is listed twice in `requests`")
                )
        for request in self.arrivals:
            if request not in self.requests:
                problems.append(
                    (
                        ("arrivals", request),
                        f"`arrivals` names request {request!r}, which this run does not "
                        "serve. Add it to `requests` or remove its arrival.",
                    )
                )
        if problems:
            raise CrossReferenceError(problems)
        return self

    def warmup_sizes(self, max_num_requests: int) -> list[int]:
        """Warmup batch sizes with "max+N" resolved."""
        sizes: list[int] = []
        for size in self.warmup:
            if isinstance(size, int):
                sizes.append(size)
            else:
                match = _WARMUP_SIZE.match(size)
                assert match is not None
                sizes.append(max_num_requests + int(match.group(2) or 0))
        return sizes


class Expectation(StrictModel):
    """An invariant expected to hold between runs."""

    check: ComparisonCheck = Field(description="Check id of the comparison.")
    runs: list[str] = Field(min_length=2, description="Runs compared (each to the first).")
    requests: list[str] | None = Field(
        None,
        description="Requests compared (default: every request the check applies to that "
        "is in all the runs).",
    )


def _unknown(kind: str, name: str, known: list[str]) -> str:
    fix = did_you_mean(name, known, f"Defined: {', '.join(known)}.")
    return f"unknown {kind} {name!r}. {fix}"


def raw_cross_reference_problems(data: Any) -> list[tuple[Loc, str]]:
    """The cross-reference problems of a scenario file whose fields do not all validate,
    read leniently from its parsed YAML, so that they are reported with the field errors
    instead of after them. Entries too malformed to name anything are left to the field
    errors."""
    from types import SimpleNamespace

    if not isinstance(data, dict):
        return []

    def names(value: Any) -> list[str]:
        return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []

    def items(value: Any) -> list[dict[str, Any]]:
        return [v if isinstance(v, dict) else {} for v in value] if isinstance(value, list) else []

    requests = data.get("requests")
    runs = [
        SimpleNamespace(name=r.get("name"), requests=names(r.get("requests")))
        for r in items(data.get("runs"))
    ]
    expect = [
        SimpleNamespace(
            check=e.get("check"), runs=names(e.get("runs")), requests=names(e.get("requests"))
        )
        for e in items(data.get("expect"))
    ]
    spread = data.get("distribution")
    distribution = (
        SimpleNamespace(requests=names(spread.get("requests")))
        if isinstance(spread, dict)
        else None
    )
    view = SimpleNamespace(
        requests=dict(requests) if isinstance(requests, dict) else {},
        runs=runs,
        expect=expect,
        distribution=distribution,
    )
    if not isinstance(requests, dict):  # no request names to resolve against
        return [p for p in cross_reference_problems(view) if "requests" not in p[0]]
    return cross_reference_problems(view)


def cross_reference_problems(scenario: Any) -> list[tuple[Loc, str]]:
    """Every run, request and expectation name that does not resolve, at its own field path."""
    problems: list[tuple[Loc, str]] = []
    request_names = list(scenario.requests)
    run_names = [run.name for run in scenario.runs]
    for index, run in enumerate(scenario.runs):
        if run.name in run_names[:index]:
            problems.append(
                (("runs", index, "name"), f"run name {run.name!r} is used twice. Rename one.")
            )
        for position, request in enumerate(run.requests):
            if request not in scenario.requests:
                problems.append(
                    (
                        ("runs", index, "requests", position),
                        f"run {run.name!r}: " + _unknown("request", request, request_names),
                    )
                )
    for index, run in enumerate(scenario.runs):
        target = getattr(run, "baseline_of", None)
        if target is None:
            continue
        if target not in run_names or target == run.name:
            problems.append(
                (
                    ("runs", index, "baseline_of"),
                    f"run {run.name!r}: baseline_of "
                    + (
                        "names the run itself"
                        if target == run.name
                        else _unknown("run", target, run_names)
                    ),
                )
            )
    for index, expectation in enumerate(scenario.expect):
        for position, run_name in enumerate(expectation.runs):
            if run_name not in run_names:
                problems.append(
                    (
                        ("expect", index, "runs", position),
                        f"expectation {expectation.check!r}: "
                        + _unknown("run", run_name, run_names),
                    )
                )
        for position, request in enumerate(expectation.requests or []):
            if request not in scenario.requests:
                problems.append(
                    (
                        ("expect", index, "requests", position),
                        f"expectation {expectation.check!r}: "
                        + _unknown("request", request, request_names),
                    )
                )
    distribution = scenario.distribution
    for position, request in enumerate(distribution.requests or [] if distribution else []):
        if request not in scenario.requests:
            problems.append(
                (
                    ("distribution", "requests", position),
                    "distribution: " + _unknown("request", request, request_names),
                )
            )
    if distribution is not None:
        problems.extend(_copy_collisions(scenario, distribution))
    return problems


_COPY_SUFFIX = re.compile(r"^(?P<base>.+)\.(?P<index>[0-9]+)$")


def _copy_collisions(scenario: Scenario, spec: DistributionSpec) -> list[tuple[Loc, str]]:
    """Request names that a distribution copy would also be called.

    Copies are named ``<request>.<i>``; a request literally named ``a.1`` next to a copied
    ``a`` would merge two streams under one id. Names stay as they are (traces and bundles
    carry them); the scenario that makes them ambiguous is refused instead.
    """
    copied = set(scenario.requests if spec.requests is None else spec.requests)
    problems: list[tuple[Loc, str]] = []
    for run in scenario.runs:
        templates = sum(1 for n in run.requests if n in copied)
        served = len(run.requests) - templates + templates * spec.samples
        if served > MAX_SERVED_REQUESTS:
            problems.append(
                (
                    ("distribution", "samples"),
                    f"run {run.name!r} would serve {served} requests ({templates} copied "
                    f"{spec.samples} times); at most {MAX_SERVED_REQUESTS}. Lower samples or "
                    "copy fewer requests.",
                )
            )
            break
    for name in scenario.requests:
        match = _COPY_SUFFIX.match(name)
        if match and match["base"] in copied:
            problems.append(
                (
                    ("requests", name),
                    f"request {name!r} has the name of copy {match['index']} of request "
                    f"{match['base']!r} (distribution copies are named <request>.<i>). "
                    "Rename it, e.g. without the dot.",
                )
            )
    return problems


class DistributionSpec(StrictModel):
    """Many seeded copies of a scenario's requests, for the ``distribution`` check.

    Each listed request is served ``samples`` times as ``<name>.0`` .. ``<name>.<N-1>``, with
    seed ``seed + i`` (seed 0 when the request sets none; unseeded requests stay unseeded).
    A run that lists several of them gets their copies interleaved (``a.0, g.0, a.1, g.1,
    ...``), so a greedy neighbour shares each batch with the sampled copies.
    """

    samples: int = Field(
        DEFAULT_DISTRIBUTION_SAMPLES,
        ge=1,
        le=100_000,
        description="Copies of each listed request (the check's sample size per request).",
    )
    requests: list[str] | None = Field(
        None, description="Requests to copy (default: every request of the scenario)."
    )


class Scenario(StrictModel):
    """A scenario file: requests, the runs that serve them, and the invariants between runs."""

    name: Slug
    description: str = Field(min_length=1)
    covers: list[Annotated[str, AfterValidator(_known_defect)]] = Field(
        default_factory=list, description="Defect ids this scenario is built to expose."
    )
    defaults: RequestDefaults = Field(default_factory=RequestDefaults)  # type: ignore[arg-type]
    requests: dict[Slug, RequestSpec] = Field(min_length=1, max_length=MAX_REQUESTS)
    runs: list[RunSpec] = Field(min_length=1, max_length=256)
    expect: list[Expectation] = Field(default_factory=list)
    default_audit: bool = Field(
        True,
        description="Part of `builtin` (the default audit). false: a long scenario that runs "
        "only when named (e.g. a large distribution sample).",
    )
    distribution: DistributionSpec | None = Field(
        None,
        description="Serve many seeded copies of the requests and test the emitted tokens "
        "against the target's exact distribution (the `distribution` check).",
    )

    @model_validator(mode="after")
    def _references_resolve(self) -> Scenario:
        problems = cross_reference_problems(self) + self._copied_children()
        if problems:
            raise CrossReferenceError(problems)
        return self

    def _copied_children(self) -> list[tuple[Loc, str]]:
        """Requests with ``n`` > 1 that ``distribution`` copies: child i samples under
        seed + i, the seed copy i of the request takes too."""
        spec = self.distribution
        if spec is None:
            return []
        copied = self.requests if spec.requests is None else spec.requests
        problems: list[tuple[Loc, str]] = []
        for name in copied:
            request = self.requests.get(name)
            n = None if request is None else request.n or self.defaults.n
            if n is not None and n > 1:
                problems.append(
                    (
                        ("requests", name, "n"),
                        f"request {name!r} has n {n} and `distribution` copies it: child i "
                        "samples under seed + i, as copy i does. Set n: 1 or leave the "
                        "request out of distribution.requests.",
                    )
                )
        return problems

    def served_requests(self, run: RunSpec) -> list[tuple[str, ResolvedRequest]]:
        """The requests a run serves, in submission order, as (request named in the run,
        resolved request), with the distribution copies expanded (see
        :class:`DistributionSpec`)."""
        spec = self.distribution
        if spec is None:
            return [(name, self.resolved_request(name)) for name in run.requests]
        copied = set(self.requests if spec.requests is None else spec.requests)
        plain = [(n, self.resolved_request(n)) for n in run.requests if n not in copied]
        templates = [self.resolved_request(n) for n in run.requests if n in copied]
        # A baseline's copies take the seeds after its speculative run's: independent arms.
        shift = spec.samples if run.baseline_of is not None else 0
        copies = [
            (
                template.name,
                template.model_copy(
                    update={
                        "name": f"{template.name}.{i}",
                        "seed": None
                        if template.seed is None
                        else (template.seed + shift + i) & UINT64_MAX,
                    }
                ),
            )
            for i in range(spec.samples)
            for template in templates
        ]
        return plain + copies

    def resolved_request(self, name: str) -> ResolvedRequest:
        """A request with the scenario defaults filled in."""
        spec = self.requests[name]
        d = self.defaults
        seed = spec.seed if spec.seed_was_set() else d.seed
        knobs = {**d.knobs(), **spec.knobs()}
        return ResolvedRequest(
            name=name,
            prompt=spec.prompt,
            seed=seed,
            temperature=d.temperature if spec.temperature is None else spec.temperature,
            top_k=d.top_k if spec.top_k is None else spec.top_k,
            top_p=d.top_p if spec.top_p is None else spec.top_p,
            max_tokens=d.max_tokens if spec.max_tokens is None else spec.max_tokens,
            **plan_knobs(knobs),
        )


def plan_knobs(knobs: dict[str, Any]) -> dict[str, Any]:
    """Knobs as plans and traces hold them: immutable, ``logit_bias`` as sorted (token, bias)
    pairs (JSON object keys are strings; a trace keeps the ids as integers)."""
    out: dict[str, Any] = {}
    for name, value in knobs.items():
        if name == "logit_bias":
            out[name] = tuple(sorted((int(t), float(b)) for t, b in value.items()))
        elif isinstance(value, list):
            out[name] = tuple(value)
        else:
            out[name] = value
    return out


class ResolvedRequest(StrictModel):
    """A scenario request with every field decided."""

    name: str
    prompt: list[int] | str
    seed: int | None
    temperature: float
    top_k: int
    top_p: float
    max_tokens: int
    min_p: float | None = None
    logit_bias: tuple[tuple[int, float], ...] | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    repetition_penalty: float | None = None
    stop_token_ids: tuple[int, ...] | None = None
    stop: tuple[str, ...] | None = None
    ignore_eos: bool | None = None
    logprobs: int | None = None
    n: int | None = None

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0


def json_schemas(comparisons: tuple[str, ...] = COMPARISON_CHECK_IDS) -> dict[str, Any]:
    """JSON Schemas of model.yaml and of scenario files, generated from the models.

    ``engine.options`` depends on ``engine.name``: the model.yaml schema says so with one
    ``if``/``then`` per engine that declares an options model. ``comparisons``: the comparison
    ids ``expect`` takes (the registered ones, plugins' included).
    """
    from specseed.engine_adapters.registry import engines

    model = AuditConfig.model_json_schema()
    defs = model.setdefault("$defs", {})
    rules = []
    for info in engines().values():
        try:
            options = info.options_model()
        except Exception:  # a broken plugin keeps its options unchecked here
            continue
        if options is None:
            continue
        schema = options.model_json_schema(ref_template="#/$defs/{model}")
        defs.update(schema.pop("$defs", {}))
        defs[options.__name__] = schema
        rules.append(
            {
                "if": {"properties": {"name": {"const": info.name}}},
                "then": {"properties": {"options": {"$ref": f"#/$defs/{options.__name__}"}}},
            }
        )
    defs["EngineConfig"]["allOf"] = rules
    scenario = Scenario.model_json_schema()
    scenario["$defs"]["Expectation"]["properties"]["check"]["enum"] = list(comparisons)
    return {"model.yaml": model, "scenario": scenario}
