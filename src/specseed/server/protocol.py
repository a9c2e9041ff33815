"""The OpenAI-compatible wire format ``specseed serve`` speaks, as pydantic models.

``/v1/completions`` takes one prompt (text, or a list of token ids) with ``seed``,
``temperature``, ``top_k``, ``top_p``, ``max_tokens`` and the other sampling knobs in OpenAI's
names (``logit_bias``, ``presence_penalty``, ``frequency_penalty``, ``stop``, ``logprobs``,
``n``) and vLLM's (``min_p``, ``repetition_penalty``, ``stop_token_ids``, ``ignore_eos``,
``return_tokens_as_token_ids``), within the limits scenarios take; it returns token ids in
both dialects real servers use (a list of prompts is refused with a 400 that says so):

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
from specseed.scenarios.schema import (
    KNOB_HELP,
    MAX_LOGIT_BIAS,
    MAX_LOGPROBS,
    MAX_N,
    MAX_REPETITION_PENALTY,
    MAX_STOP_LENGTH,
    MAX_STOP_STRINGS,
    MAX_STOP_TOKEN_IDS,
    MIN_REPETITION_PENALTY,
    MIN_TEMPERATURE,
    MIN_TOP_P,
    TOKEN_ID_MAX,
)

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
    n: int = Field(1, ge=1, le=MAX_N, description=KNOB_HELP["n"])
    min_p: float | None = Field(None, ge=0.0, le=1.0, description=KNOB_HELP["min_p"])
    logit_bias: dict[str, float] | None = Field(
        None, max_length=MAX_LOGIT_BIAS, description=KNOB_HELP["logit_bias"]
    )
    presence_penalty: float | None = Field(
        None, ge=-2.0, le=2.0, description=KNOB_HELP["presence_penalty"]
    )
    frequency_penalty: float | None = Field(
        None, ge=-2.0, le=2.0, description=KNOB_HELP["frequency_penalty"]
    )
    repetition_penalty: float | None = Field(
        None,
        ge=MIN_REPETITION_PENALTY,
        le=MAX_REPETITION_PENALTY,
        description=KNOB_HELP["repetition_penalty"],
    )
    stop_token_ids: list[int] | None = Field(
        None, max_length=MAX_STOP_TOKEN_IDS, description=KNOB_HELP["stop_token_ids"]
    )
    stop: str | list[str] | None = Field(None, description=KNOB_HELP["stop"])
    ignore_eos: bool | None = Field(None, description=KNOB_HELP["ignore_eos"])
    logprobs: int | None = Field(None, ge=0, le=MAX_LOGPROBS, description=KNOB_HELP["logprobs"])
    return_tokens_as_token_ids: bool = Field(
        False,
        description="vLLM extension: name tokens in logprobs as `token_id:<id>`, not as text.",
    )
    stream: bool = Field(False, description="Streaming is not served; must be false.")
    return_token_ids: bool = Field(
        False, description="vLLM/SGLang dialect: add choices[].token_ids and prompt_token_ids."
    )
    detokenize: bool = Field(
        True, description="trtllm-serve dialect: false adds choices[].token_ids."
    )

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

    @field_validator("stop")
    @classmethod
    def _stop_strings(cls, value: str | list[str] | None) -> list[str] | None:
        if value is None or value == "" or value == []:
            return None
        strings = [value] if isinstance(value, str) else value
        if len(strings) > MAX_STOP_STRINGS:
            raise ValueError(f"at most {MAX_STOP_STRINGS} stop strings")
        if any(not 1 <= len(text) <= MAX_STOP_LENGTH for text in strings):
            raise ValueError(f"a stop string is 1 to {MAX_STOP_LENGTH} characters")
        return strings

    @field_validator("logit_bias")
    @classmethod
    def _bias_by_token_id(cls, value: dict[str, float] | None) -> dict[str, float] | None:
        for key, bias in (value or {}).items():
            if not (key.isascii() and key.isdigit() and len(key) <= 10) or int(key) > TOKEN_ID_MAX:
                raise ValueError(f"keys are token ids; {key[:20]!r} is not one")
            if not -100.0 <= bias <= 100.0:
                raise ValueError(f"token {key}: a bias is from -100 to 100, not {bias}")
        return value

    @field_validator("stop_token_ids")
    @classmethod
    def _token_ids(cls, value: list[int] | None) -> list[int] | None:
        if value is not None and any(not 0 <= t <= TOKEN_ID_MAX for t in value):
            raise ValueError(f"token ids are from 0 to {TOKEN_ID_MAX}")
        return value

    @field_validator("min_p")
    @classmethod
    def _min_p_samples(cls, value: float | None) -> float | None:
        if value is not None and 0.0 < value < MIN_TOP_P:
            raise ValueError(f"must be 0 or at least {MIN_TOP_P:.3g}, the smallest normal float32")
        return value

    def knobs(self) -> dict[str, Any]:
        """The knobs this request sets, as a ``RequestPlan`` holds them (None: unset)."""
        bias = self.logit_bias
        return {
            "min_p": self.min_p,
            "logit_bias": None
            if bias is None
            else tuple(sorted((int(k), float(v)) for k, v in bias.items())),
            "presence_penalty": self.presence_penalty,
            "frequency_penalty": self.frequency_penalty,
            "repetition_penalty": self.repetition_penalty,
            "stop_token_ids": None if self.stop_token_ids is None else tuple(self.stop_token_ids),
            "stop": None if not self.stop else tuple(self.stop),
            "ignore_eos": self.ignore_eos,
            "logprobs": self.logprobs,
            "n": self.n if self.n > 1 else None,
        }

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


class CompletionLogprobs(BaseModel):
    """``choices[].logprobs`` as the OpenAI completions API writes it."""

    tokens: list[str]
    token_logprobs: list[float]
    top_logprobs: list[dict[str, float]]
    text_offset: list[int]


class CompletionChoice(BaseModel):
    index: int = 0
    text: str
    token_ids: list[int] | None = None
    prompt_token_ids: list[int] | None = None
    finish_reason: Literal["length", "stop"] = "length"
    logprobs: CompletionLogprobs | None = None


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
