"""The OpenAI-compatible wire format ``specseed serve`` speaks, as pydantic models.

``/v1/completions`` takes one prompt (text, or a list of token ids) with ``seed``,
``temperature``, ``top_k``, ``top_p`` and ``max_tokens``, and returns token ids in both
dialects real servers use (``logprobs``, ``stop`` and a list of prompts are refused with a 400
that says so, never ignored):

- vLLM and SGLang: ``return_token_ids: true`` adds ``choices[].token_ids`` (and
  ``choices[].prompt_token_ids``);
- trtllm-serve: ``detokenize: false`` adds ``choices[].token_ids``.

The request models are what FastAPI publishes in ``/openapi.json``, so a client that
detects its server's dialect from the schema sees both fields here.

Sampling values are validated, never clamped, with one exception: a value the engine cannot
sample with (a temperature below 1e-5, a top_p below the smallest normal float32, NaN or
infinity anywhere) is a 400 naming the field, where it used to crash the step of every request
sharing it. ``top_k`` at or above the vocabulary size means no filter, as in vLLM.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from specseed.core.text import for_json
from specseed.scenarios.schema import MIN_TEMPERATURE, MIN_TOP_P, TOKEN_ID_MAX

INT64_MIN = -(1 << 63)
UINT64_MAX = (1 << 64) - 1
MAX_TOKENS_LIMIT = 4096
"""Most tokens one request may ask for (keeps one request's work bounded)."""
MAX_BODY_BYTES = 1 << 20
"""Largest request body read (1 MiB; a prompt of the longest the engine holds is ~4 KiB)."""


class CompletionRequest(BaseModel):
    """Body of ``POST /v1/completions`` (the subset of the OpenAI API specseed serves)."""

    # Unknown fields are ignored, as OpenAI-compatible servers do: clients send extras
    # (user, logit_bias, ...) that do not change what this engine computes.
    model_config = ConfigDict(extra="ignore", allow_inf_nan=False)

    model: str | None = Field(None, description="Served model name (see /v1/models).")
    prompt: str | list[int] = Field(
        description="Prompt text (encoded byte by byte) or a list of token ids."
    )
    seed: int | None = Field(
        None,
        ge=INT64_MIN,
        le=UINT64_MAX,
        description="Per-request sampling seed; an int64 is read as its uint64 bits.",
    )
    temperature: float = Field(
        1.0,
        ge=0.0,
        le=100.0,
        description=f"0 = greedy; otherwise from {MIN_TEMPERATURE:g} to 100 (smaller values "
        "overflow float32 logits): anything else is a 400, never clamped.",
    )
    top_k: int = Field(
        0,
        ge=-1,
        le=TOKEN_ID_MAX,
        description="0 or -1 = no top-k filter; at or above the vocabulary size, no filter "
        "either (as vLLM).",
    )
    top_p: float = Field(
        1.0,
        gt=0.0,
        le=1.0,
        description=f"From {MIN_TOP_P:.3g} (the smallest normal float32) to 1; anything else "
        "is a 400, never clamped.",
    )
    max_tokens: int = Field(16, ge=1, le=MAX_TOKENS_LIMIT)
    n: int = Field(1, ge=1, le=1, description="Only 1 is served.")
    stream: bool = Field(False, description="Streaming is not served; must be false.")
    return_token_ids: bool = Field(
        False, description="vLLM/SGLang dialect: add choices[].token_ids and prompt_token_ids."
    )
    detokenize: bool = Field(
        True, description="trtllm-serve dialect: false adds choices[].token_ids."
    )
    logprobs: Any = Field(
        None, description="Not served: send null or leave it out (a 400 otherwise)."
    )
    stop: Any = Field(None, description="Not served: send null or leave it out (a 400 otherwise).")

    # Fields this server does not serve are refused by name rather than ignored: a client
    # that asked for log-probabilities or stop sequences would read an answer without them
    # (or with tokens past a stop) as if they had been applied.
    @field_validator("prompt", mode="before")
    @classmethod
    def _one_prompt(cls, value: Any) -> Any:
        if isinstance(value, list) and any(isinstance(v, (str, list)) for v in value):
            raise ValueError(
                f"a list of {len(value)} prompts is not served: send one prompt (text or a "
                "list of token ids) per request"
            )
        return value

    @field_validator("prompt")
    @classmethod
    def _encodable(cls, value: Any) -> Any:
        # JSON may carry "\ud800", which UTF-8 (the engine's byte encoding) cannot encode.
        if isinstance(value, str) and any("\ud800" <= c <= "\udfff" for c in value):
            raise ValueError("the text holds a lone surrogate (\\ud800-\\udfff), not UTF-8 text")
        return value

    @field_validator("logprobs")
    @classmethod
    def _no_logprobs(cls, value: Any) -> Any:
        if value is not None and value is not False:
            raise ValueError("log-probabilities are not served: send null or leave it out")
        return None

    @field_validator("stop")
    @classmethod
    def _no_stop(cls, value: Any) -> Any:
        if value not in (None, [], ""):
            raise ValueError(
                "stop sequences are not served (every request runs to max_tokens): send null "
                "or leave it out"
            )
        return None

    @field_validator("temperature")
    @classmethod
    def _temperature_samples(cls, value: float) -> float:
        if 0.0 < value < MIN_TEMPERATURE:
            raise ValueError(
                f"must be 0 (greedy) or at least {MIN_TEMPERATURE:g}: the engine divides "
                "float32 logits by it, and a smaller one overflows them"
            )
        return value

    @field_validator("top_p")
    @classmethod
    def _top_p_samples(cls, value: float) -> float:
        if value < MIN_TOP_P:
            raise ValueError(
                f"must be at least {MIN_TOP_P:.3g}, the smallest normal float32: a smaller "
                "top_p is 0 in float32 and keeps no token"
            )
        return value


class CompletionChoice(BaseModel):
    index: int = 0
    text: str
    token_ids: list[int] | None = None
    prompt_token_ids: list[int] | None = None
    finish_reason: Literal["length", "stop"] = "length"
    logprobs: None = None


class Usage(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class CompletionResponse(BaseModel):
    id: str
    object: Literal["text_completion"] = "text_completion"
    created: int
    model: str
    choices: list[CompletionChoice]
    usage: Usage


class ModelCard(BaseModel):
    id: str
    object: Literal["model"] = "model"
    owned_by: str = "specseed"


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelCard]


def error_body(message: str, kind: str, code: int) -> dict[str, Any]:
    """The OpenAI error envelope; a message quoting the client's text holds no lone surrogate
    (the JSON response is UTF-8)."""
    return {"error": {"message": for_json(message), "type": kind, "code": code}}


def decode_text(token_ids: list[int]) -> str:
    """Text of token ids: the byte-level inverse of the engine's prompt encoding.

    The reference engine has no tokenizer; ids below 256 are the bytes of UTF-8 text, any
    other id is written ``<id>``. Audits read ``token_ids``, never this text.
    """
    parts: list[str] = []
    raw = bytearray()
    for token in token_ids:
        if token < 256:
            raw.append(token)
            continue
        if raw:
            parts.append(raw.decode("utf-8", errors="replace"))
            raw.clear()
        parts.append(f"<{token}>")
    if raw:
        parts.append(raw.decode("utf-8", errors="replace"))
    return "".join(parts)
