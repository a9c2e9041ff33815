"""Options of the ``openai`` engine (model.yaml ``engine.options``), as a pydantic model.

The API key itself never appears here: ``api_key_env`` names the environment variable that
holds it, so model.yaml, traces, reports and bundles carry only that name.
"""

from __future__ import annotations

import unicodedata
from typing import Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from specseed.core.errors import InputError

_ENV_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"

SERVER_SETTINGS = ("max_num_requests", "max_draft_len", "verification", "overlap_scheduler")
"""Engine settings a scenario run may change, which an HTTP client cannot change on a server:
a run that changes one is served by the variant endpoint configured for it, or not at all."""


def check_api_key(key: str, where: str) -> None:
    """``InputError`` unless ``key`` can travel in an ``Authorization: Bearer`` header: visible
    ASCII only (a non-breaking space pasted from a web page, a newline, a letter outside ASCII
    would fail every request, or split the header). Says where and what, never the key."""
    bad = next(((i, c) for i, c in enumerate(key) if not "!" <= c <= "~"), None)
    if bad is not None:
        index, char = bad
        raise InputError(
            f"the API key in {where} holds {unicodedata.name(char, f'U+{ord(char):04X}').lower()}"
            f" (U+{ord(char):04X}) at character {index + 1} of {len(key)}: an HTTP header "
            "carries visible ASCII only",
            hint="copy the key again without spaces or line breaks",
        )


def _check_url(value: str) -> str:
    """An ``http://`` or ``https://`` URL an HTTP client can open: a host, a port in 1-65535
    if one is given, no whitespace or control character (a CR/LF would split a request
    line), no query or fragment (the client appends ``/v1/...``)."""
    if not value.startswith(("http://", "https://")):
        raise ValueError(f"{value!r} is not an http:// or https:// URL")
    bad = next((c for c in value if c.isspace() or not c.isprintable()), None)
    if bad is not None:
        raise ValueError(f"{value!r} holds {bad!r}: a URL has no whitespace or control character")
    try:
        parts = urlsplit(value)
        port = parts.port  # ValueError when out of range or not a number
    except ValueError as exc:
        raise ValueError(f"{value!r} is not a valid URL ({exc})") from None
    if not parts.hostname:
        raise ValueError(f"{value!r} names no host")
    if port == 0:
        raise ValueError(f"{value!r}: port 0 is not a port a server listens on")
    if parts.query or parts.fragment or value.endswith(("?", "#")):
        raise ValueError(f"{value!r} has a query or fragment: give the server's root URL")
    try:  # and the client's own parser, where it is installed (an IDNA host, a bracket)
        import httpx
    except ImportError:
        return value.rstrip("/")
    try:
        _ = httpx.URL(value.rstrip("/") + "/v1/completions").host  # .host decodes IDNA
    except (httpx.InvalidURL, ValueError) as exc:  # IDNAError is a UnicodeError
        raise ValueError(f"{value!r} is not a valid URL ({exc})") from None
    return value.rstrip("/")


class StrictOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class VariantSettings(StrictOptions):
    """Engine settings a variant endpoint runs with (the keys a scenario run may change)."""

    max_num_requests: int | None = Field(None, ge=1, le=1024)
    max_draft_len: int | None = Field(None, ge=0, le=16)
    verification: Literal["rejection", "strict"] | None = None
    overlap_scheduler: bool | None = None


class EndpointVariant(StrictOptions):
    """A second server (or model) that serves runs asking for other engine settings."""

    when: VariantSettings = Field(
        description="The settings this endpoint runs with, e.g. {max_draft_len: 0} for the "
        "same model served without speculation."
    )
    base_url: str | None = Field(None, description="Its URL (default: the main base_url).")
    model: str | None = Field(None, description="Its model id (default: the main model).")

    @field_validator("base_url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        return None if value is None else _check_url(value)

    @model_validator(mode="after")
    def _says_something(self) -> EndpointVariant:
        if not self.when.model_fields_set:
            raise ValueError("`when` names no setting")
        if self.base_url is None and self.model is None:
            raise ValueError("a variant needs its own base_url or model")
        return self


class OpenAIOptions(StrictOptions):
    """How to reach an OpenAI-compatible server and how hard to push it."""

    base_url: str = Field(
        description="Server root, e.g. http://127.0.0.1:8000 (the client adds /v1/...)."
    )
    model: str | None = Field(
        None, description="Model id to request (default: the first one in /v1/models)."
    )
    api_key_env: str | None = Field(
        None,
        pattern=_ENV_NAME,
        description="Name of the environment variable holding the API key (sent as a Bearer "
        "token). The key itself is never written anywhere.",
    )
    token_ids: Literal["auto", "return_token_ids", "detokenize"] = Field(
        "auto",
        description="How to ask for token ids: return_token_ids (vLLM, SGLang), detokenize "
        "(trtllm-serve), or auto (read /openapi.json, else probe).",
    )
    concurrency: int = Field(16, ge=1, le=256, description="Most requests in flight at once.")
    connect_timeout_s: float = Field(5.0, gt=0, le=300)
    request_timeout_s: float = Field(
        120.0,
        gt=0,
        le=3600,
        description="Per HTTP attempt, for the whole exchange (headers and body).",
    )
    retries: int = Field(
        3, ge=0, le=10, description="Retries on 429, 5xx and connection errors (per request)."
    )
    backoff_s: float = Field(
        0.5, ge=0, le=60, description="First retry's wait; doubles each retry."
    )
    max_backoff_s: float = Field(8.0, ge=0, le=300)
    arrival_step_s: float = Field(
        0.05,
        ge=0,
        le=10,
        description="Seconds that stand for one engine step in a scenario's arrivals.",
    )
    ignore_eos: bool = Field(
        True,
        description="Send ignore_eos: true so every request runs to max_tokens (vLLM, "
        "SGLang and trtllm-serve accept it).",
    )
    variants: list[EndpointVariant] = Field(
        default_factory=list,
        description="Endpoints for runs that change engine settings (e.g. max_draft_len 0 "
        "for greedy-speculation). A run with a setting no endpoint serves is not run.",
    )

    @field_validator("base_url")
    @classmethod
    def _url(cls, value: str) -> str:
        return _check_url(value)
