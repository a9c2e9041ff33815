"""The reference engine's own options (``engine.options`` in model.yaml).

Imported by the engine registry to validate model.yaml and to build the JSON Schema, so it
must stay light: pydantic and the data modules only, never torch.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from specseed.core.defects import INJECTABLE_DEFECT_IDS
from specseed.core.wording import one_of
from specseed.engine_adapters.contracts import contract_names


class ReferenceOptions(BaseModel):
    """Options of the embedded reference engine."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model_seed: int = Field(
        0, ge=0, le=(1 << 63) - 1, description="Seed of the built-in tiny model's weights."
    )
    rng_profile: str | None = Field(
        None,
        description="The contract the engine itself follows (null = the one the audit holds "
        "it to, engine.contract).",
    )
    defects: list[str] = Field(
        default_factory=list,
        description="Defect ids to inject on purpose (see `specseed audit --matrix`; those "
        "planted for `specseed search` too).",
    )

    ignore_eos: bool = Field(
        True,
        description="What a request that leaves ignore_eos unset gets: true runs it to "
        "max_tokens past the end-of-sequence token (what the other adapters send by default), "
        "false stops it there as a server does. A request's own ignore_eos always wins.",
    )
    sampling_backend: Literal["cpu", "flashinfer"] = Field(
        "cpu",
        description="Where sampling and rejection verification run: cpu (specseed's "
        "flashinfer-exact CPU twins) or flashinfer (its CUDA kernels; needs device: cuda and "
        "flashinfer-python).",
    )

    @field_validator("rng_profile")
    @classmethod
    def _known_profile(cls, value: str | None) -> str | None:
        return None if value is None else one_of("rng profile", value, contract_names())

    @field_validator("defects")
    @classmethod
    def _known_defects(cls, value: list[str]) -> list[str]:
        for item in value:
            one_of("defect", item, INJECTABLE_DEFECT_IDS)
        if len(set(value)) != len(value):
            raise ValueError("a defect is listed twice")
        return value
