"""Pydantic models of model.yaml and of scenario files (the single source of their JSON Schema).

Every model forbids unknown keys. Field descriptions are the reference documentation: the
README's tables and ``specseed schema`` are generated from them.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from specseed.contracts import CONTRACT_NAMES
from specseed.defects import DEFECT_IDS
from specseed.engine_adapters.registry import engine_names

UINT64_MAX = (1 << 64) - 1
INT64_MIN = -(1 << 63)

ComparisonCheck = Literal[
    "run-to-run",
    "uptime-invariance",
    "batch-invariance",
    "position-invariance",
    "overlap-invariance",
    "greedy-spec-equivalence",
]
"""Checks that compare runs; scenarios name them under ``expect``."""
COMPARISON_CHECKS: tuple[str, ...] = ComparisonCheck.__args__  # type: ignore[attr-defined]

Slug = Annotated[
    str,
    Field(pattern=r"^[a-z0-9][a-z0-9_.-]*$", max_length=64),
]


class StrictModel(BaseModel):
    """Base: unknown keys are errors, values are immutable after validation."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def _check_one_of(kind: str, value: str, known: tuple[str, ...]) -> str:
    if value not in known:
        raise ValueError(f"unknown {kind} {value!r}; expected one of: {', '.join(known)}")
    return value


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
        description="RNG layout the audit holds the engine to: " + " | ".join(CONTRACT_NAMES),
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
        return _check_one_of("engine", value, engine_names())

    @field_validator("contract")
    @classmethod
    def _known_contract(cls, value: str) -> str:
        return _check_one_of("contract", value, CONTRACT_NAMES)


class ChecksConfig(StrictModel):
    """The ``checks:`` section of model.yaml."""

    skip: list[str] = Field(
        default_factory=list, description="Check ids not to run (reported as skip)."
    )


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


class RequestDefaults(StrictModel):
    """Values a scenario's requests take unless they set their own."""

    seed: int | None = Field(None, ge=INT64_MIN, le=UINT64_MAX)
    temperature: float = Field(1.0, ge=0.0, le=100.0)
    top_k: int = Field(0, ge=0)
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    max_tokens: int = Field(16, ge=1, le=4096)


class RequestSpec(StrictModel):
    """One request of a scenario. Unset sampling fields come from the scenario's defaults."""

    prompt: list[Annotated[int, Field(ge=0)]] | str = Field(
        description="Prompt token ids, or text (encoded by the engine's tokenizer)."
    )
    seed: int | None = Field(
        None,
        ge=INT64_MIN,
        le=UINT64_MAX,
        description="SamplingParams.seed: a uint64, or an int64 whose bits are used; null = unseeded.",
    )
    temperature: float | None = Field(None, ge=0.0, le=100.0, description="0 = greedy.")
    top_k: int | None = Field(None, ge=0, description="0 = no top-k filter.")
    top_p: float | None = Field(None, gt=0.0, le=1.0, description="1.0 = no top-p filter.")
    max_tokens: int | None = Field(None, ge=1, le=4096)

    @field_validator("prompt")
    @classmethod
    def _non_empty(cls, value: list[int] | str) -> list[int] | str:
        if len(value) == 0:
            raise ValueError("the prompt is empty")
        return value

    def seed_was_set(self) -> bool:
        return "seed" in self.model_fields_set


_WARMUP_SIZE = re.compile(r"^max(\+(\d+))?$")
WarmupBatch = Annotated[
    int | str,
    Field(description='A batch size, or "max" / "max+N" (relative to max_num_requests).'),
]


class PriorTraffic(StrictModel):
    """Ordinary requests the engine serves, one batch, before the scenario's requests."""

    requests: int = Field(ge=1, le=256, description="How many requests.")
    max_tokens: int = Field(8, ge=1, le=256)
    seeded: bool = Field(False, description="Give them seeds (1000 + i) or leave them unseeded.")


class EngineOverrides(StrictModel):
    """Engine settings a run changes for itself."""

    max_num_requests: int | None = Field(None, ge=1, le=1024)
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
        description="Warmup batches run before serving; sizes may exceed max_num_requests.",
    )
    prior_traffic: PriorTraffic | None = Field(
        None, description="Traffic served before the scenario (engine uptime)."
    )
    engine: EngineOverrides = Field(default_factory=EngineOverrides)  # type: ignore[arg-type]

    @field_validator("warmup")
    @classmethod
    def _warmup_sizes(cls, value: list[int | str]) -> list[int | str]:
        for size in value:
            if isinstance(size, int):
                if size < 1:
                    raise ValueError(f"warmup batch size {size} must be at least 1")
            elif not _WARMUP_SIZE.match(size):
                raise ValueError(f'warmup batch {size!r}: write a number, "max" or "max+N"')
        return value

    @model_validator(mode="after")
    def _consistent(self) -> RunSpec:
        if len(set(self.requests)) != len(self.requests):
            raise ValueError("a request is listed twice in `requests`")
        stray = sorted(set(self.arrivals) - set(self.requests))
        if stray:
            raise ValueError(f"`arrivals` names requests not in `requests`: {', '.join(stray)}")
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


class Scenario(StrictModel):
    """A scenario file: requests, the runs that serve them, and the invariants between runs."""

    name: Slug
    description: str = Field(min_length=1)
    covers: list[str] = Field(
        default_factory=list, description="Defect ids this scenario is built to expose."
    )
    defaults: RequestDefaults = Field(default_factory=RequestDefaults)  # type: ignore[arg-type]
    requests: dict[Slug, RequestSpec] = Field(min_length=1)
    runs: list[RunSpec] = Field(min_length=1)
    expect: list[Expectation] = Field(default_factory=list)

    @field_validator("covers")
    @classmethod
    def _known_defects(cls, value: list[str]) -> list[str]:
        for item in value:
            _check_one_of("defect", item, DEFECT_IDS)
        return value

    @model_validator(mode="after")
    def _references_resolve(self) -> Scenario:
        run_names = [run.name for run in self.runs]
        duplicates = sorted({n for n in run_names if run_names.count(n) > 1})
        if duplicates:
            raise ValueError(f"run names must be unique: {', '.join(duplicates)}")
        for run in self.runs:
            unknown = [r for r in run.requests if r not in self.requests]
            if unknown:
                raise ValueError(
                    f"run {run.name!r} names unknown requests: {', '.join(unknown)} "
                    f"(defined: {', '.join(self.requests)})"
                )
        for expectation in self.expect:
            unknown = [r for r in expectation.runs if r not in run_names]
            if unknown:
                raise ValueError(
                    f"expectation {expectation.check!r} names unknown runs: "
                    f"{', '.join(unknown)} (defined: {', '.join(run_names)})"
                )
            for request in expectation.requests or []:
                if request not in self.requests:
                    raise ValueError(
                        f"expectation {expectation.check!r} names unknown request {request!r}"
                    )
        return self

    def resolved_request(self, name: str) -> ResolvedRequest:
        """A request with the scenario defaults filled in."""
        spec = self.requests[name]
        d = self.defaults
        seed = spec.seed if spec.seed_was_set() else d.seed
        return ResolvedRequest(
            name=name,
            prompt=spec.prompt,
            seed=seed,
            temperature=d.temperature if spec.temperature is None else spec.temperature,
            top_k=d.top_k if spec.top_k is None else spec.top_k,
            top_p=d.top_p if spec.top_p is None else spec.top_p,
            max_tokens=d.max_tokens if spec.max_tokens is None else spec.max_tokens,
        )


class ResolvedRequest(StrictModel):
    """A scenario request with every field decided."""

    name: str
    prompt: list[int] | str
    seed: int | None
    temperature: float
    top_k: int
    top_p: float
    max_tokens: int

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0


def json_schemas() -> dict[str, Any]:
    """JSON Schemas of model.yaml and of scenario files, generated from the models.

    ``engine.options`` depends on ``engine.name``: the model.yaml schema says so with one
    ``if``/``then`` per engine that declares an options model.
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
    return {"model.yaml": model, "scenario": Scenario.model_json_schema()}
