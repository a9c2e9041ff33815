"""An async client for OpenAI-compatible ``/v1/completions`` that returns exact token ids.

It speaks the two token-id dialects servers use (``return_token_ids: true`` for vLLM and
SGLang, ``detokenize: false`` for trtllm-serve; both answer in ``choices[].token_ids``),
finds out which one its server speaks (from ``/openapi.json``, else by a probe request),
and retries 429, 5xx and connection errors with capped exponential backoff.

Retries are one small loop here rather than a library: the policy (which statuses, how long,
``Retry-After`` honoured, attempts counted per request for the trace) fits in twenty lines
that a reader can check, and httpx's own transport retries cover connection failures only,
not 429 or 5xx answers.
"""

from __future__ import annotations

import asyncio
import email.utils
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import httpx
from pydantic import BaseModel, ConfigDict, ValidationError

from specseed.core.errors import SpecseedError
from specseed.core.wording import plural

TokenIdDialect = Literal["return_token_ids", "detokenize"]
"""How a server is asked for token ids: vLLM/SGLang, or trtllm-serve."""

DIALECT_FIELD: dict[TokenIdDialect, tuple[str, bool]] = {
    "return_token_ids": ("return_token_ids", True),
    "detokenize": ("detokenize", False),
}
"""The request field and value that make a server of each dialect return token ids."""

COMPLETIONS = "/v1/completions"


class HttpEngineError(SpecseedError):
    """A request the server did not serve; the adapter records it as the run's failure."""


class ServerUnavailable(HttpEngineError):
    """No answer, or 429/5xx, after every retry."""


class RequestRejected(HttpEngineError):
    """The server refused the request (4xx other than 429); retrying would not help."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


class MalformedResponse(HttpEngineError):
    """The server answered 2xx with something that is not a completion with token ids."""


@dataclass(frozen=True)
class ClientLimits:
    """Timeouts, retries and concurrency of one client."""

    concurrency: int = 16
    connect_timeout_s: float = 5.0
    request_timeout_s: float = 120.0
    retries: int = 3
    """Retries after the first attempt (0 = none)."""
    backoff_s: float = 0.5
    """Wait before the first retry; doubles each retry."""
    max_backoff_s: float = 8.0


@dataclass(frozen=True)
class Completion:
    """One completion as the server returned it."""

    token_ids: tuple[int, ...]
    prompt_token_ids: tuple[int, ...] | None
    """The prompt as the server tokenized it, where its dialect returns it."""
    finish_reason: str | None
    attempts: int
    """HTTP attempts it took (1 = no retry)."""
    seconds: float


@dataclass(frozen=True)
class SamplingRequest:
    """What one completion asks for."""

    prompt: tuple[int, ...] | str
    seed: int | None
    temperature: float
    top_k: int
    top_p: float
    max_tokens: int


class _Choice(BaseModel):
    model_config = ConfigDict(extra="ignore")
    token_ids: list[int] | None = None
    prompt_token_ids: list[int] | None = None
    finish_reason: str | None = None


class _CompletionBody(BaseModel):
    model_config = ConfigDict(extra="ignore")
    choices: list[_Choice]


def int64_seed(seed: int) -> int:
    """The int64 with the bits of a uint64 seed: servers validate seeds as int64."""
    seed &= (1 << 64) - 1
    return seed - (1 << 64) if seed >= 1 << 63 else seed


def completion_body(
    request: SamplingRequest,
    *,
    model: str,
    dialect: TokenIdDialect,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The JSON body of one completion request."""
    field, value = DIALECT_FIELD[dialect]
    body: dict[str, Any] = {
        "model": model,
        "prompt": list(request.prompt) if isinstance(request.prompt, tuple) else request.prompt,
        "max_tokens": request.max_tokens,
        # Always explicit: a server fills unset fields from the model's generation config.
        "temperature": request.temperature,
        "top_p": request.top_p,
        "stream": False,
        field: value,
    }
    if request.top_k > 0:
        body["top_k"] = request.top_k
    elif dialect == "return_token_ids":
        body["top_k"] = -1  # "no top-k" for vLLM and SGLang alike (SGLang refuses 0)
    if request.seed is not None:
        body["seed"] = int64_seed(request.seed)
    body.update(extra or {})
    return body


def _error_message(response: httpx.Response) -> str:
    """The server's own error text, from the OpenAI envelope or FastAPI's ``detail``."""
    try:
        payload = response.json()
    except ValueError:
        return response.text[:200].strip() or response.reason_phrase
    if isinstance(payload, dict):
        error = payload.get("error")
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])
        if isinstance(error, str):
            return error
        if payload.get("message"):
            return str(payload["message"])
        if payload.get("detail"):
            return str(payload["detail"])
    return str(payload)[:200]


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:  # the other form Retry-After may take: an HTTP date
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def parse_completion(payload: object, max_tokens: int) -> tuple[_Choice, str | None]:
    """The first choice of a completion body, or ``MalformedResponse`` saying what is wrong."""
    try:
        body = _CompletionBody.model_validate(payload)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "body"
        raise MalformedResponse(
            f"the completion is not an OpenAI completion: {where}: {first['msg']}"
        ) from None
    if not body.choices:
        raise MalformedResponse("the completion has no choices")
    choice = body.choices[0]
    if choice.token_ids is None:
        raise MalformedResponse(
            "the completion has no choices[0].token_ids: the server ignored the token-id "
            "request field (a gateway may drop it, or the server speaks another dialect)"
        )
    if len(choice.token_ids) > max_tokens:
        raise MalformedResponse(
            f"the completion has {len(choice.token_ids)} token ids, more than max_tokens "
            f"{max_tokens}"
        )
    if any(t < 0 for t in choice.token_ids):
        raise MalformedResponse("the completion has negative token ids")
    return choice, choice.finish_reason


class CompletionClient:
    """One server endpoint: ``async with CompletionClient(...) as client``."""

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        limits: ClientLimits | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.limits = limits or ClientLimits()
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        lim = self.limits
        self._http = httpx.AsyncClient(
            base_url=self.base_url,
            headers=headers,
            timeout=httpx.Timeout(lim.request_timeout_s, connect=lim.connect_timeout_s),
            limits=httpx.Limits(
                max_connections=lim.concurrency, max_keepalive_connections=lim.concurrency
            ),
            transport=transport,
        )

    async def __aenter__(self) -> CompletionClient:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self._http.aclose()

    async def _send(
        self, method: str, path: str, body: dict[str, Any] | None, retries: int
    ) -> tuple[httpx.Response, int]:
        """One call with retries on 429, 5xx and transport errors; (2xx/4xx response, attempts)."""
        lim = self.limits
        attempt = 0
        while True:
            attempt += 1
            wait: float | None = None
            try:
                response = await self._http.request(method, path, json=body)
            except httpx.TransportError as exc:
                problem = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            else:
                if response.status_code != 429 and response.status_code < 500:
                    return response, attempt
                problem = f"HTTP {response.status_code}: {_error_message(response)}"
                wait = _retry_after(response)
            if attempt > retries:
                raise ServerUnavailable(
                    f"{method} {self.base_url}{path}: {problem} ({plural(attempt, 'attempt')})"
                )
            backoff = lim.backoff_s * 2 ** (attempt - 1)
            await asyncio.sleep(min(lim.max_backoff_s, wait if wait is not None else backoff))

    async def get_json(self, path: str, *, retries: int | None = None) -> Any:
        """GET a JSON document; ``RequestRejected`` on 4xx, ``MalformedResponse`` if not JSON."""
        response, _ = await self._send(
            "GET", path, None, self.limits.retries if retries is None else retries
        )
        if response.status_code >= 400:
            raise RequestRejected(
                f"GET {self.base_url}{path}: HTTP {response.status_code}: "
                f"{_error_message(response)}",
                response.status_code,
            )
        try:
            return response.json()
        except ValueError:
            raise MalformedResponse(f"GET {self.base_url}{path}: the answer is not JSON") from None

    async def complete(
        self,
        request: SamplingRequest,
        *,
        model: str,
        dialect: TokenIdDialect,
        extra: Mapping[str, Any] | None = None,
        retries: int | None = None,
    ) -> Completion:
        """One completion with its token ids."""
        body = completion_body(request, model=model, dialect=dialect, extra=extra)
        started = time.perf_counter()
        response, attempts = await self._send(
            "POST", COMPLETIONS, body, self.limits.retries if retries is None else retries
        )
        if response.status_code >= 400:
            raise RequestRejected(
                f"the server refused a completion (HTTP {response.status_code}): "
                f"{_error_message(response)}",
                response.status_code,
            )
        try:
            payload = response.json()
        except ValueError:
            raise MalformedResponse(f"the completion is not JSON: {response.text[:80]!r}") from None
        choice, finish = parse_completion(payload, request.max_tokens)
        assert choice.token_ids is not None
        prompt_ids = None if choice.prompt_token_ids is None else tuple(choice.prompt_token_ids)
        return Completion(
            token_ids=tuple(choice.token_ids),
            prompt_token_ids=prompt_ids,
            finish_reason=finish,
            attempts=attempts,
            seconds=time.perf_counter() - started,
        )

    async def served_models(self) -> list[str]:
        """Model ids from ``/v1/models``."""
        payload = await self.get_json("/v1/models")
        data = payload.get("data") if isinstance(payload, dict) else None
        if not isinstance(data, list):
            raise MalformedResponse(f"{self.base_url}/v1/models has no data list")
        return [str(item["id"]) for item in data if isinstance(item, dict) and "id" in item]


# -- dialect detection -------------------------------------------------------------------


@dataclass(frozen=True)
class DialectDetection:
    """Which token-id dialect a server speaks and how that was found out."""

    dialect: TokenIdDialect
    method: Literal["openapi", "probe", "configured"]
    detail: str


def dialect_from_openapi(schema: object) -> TokenIdDialect | None:
    """The dialect a server's OpenAPI document declares for ``/v1/completions``, if any."""
    if not isinstance(schema, dict):
        return None
    try:
        content = schema["paths"][COMPLETIONS]["post"]["requestBody"]["content"]
        body_schema = content["application/json"]["schema"]
    except (KeyError, TypeError):
        return None
    fields = _properties(schema, body_schema, depth=0)
    if "return_token_ids" in fields:
        return "return_token_ids"
    if "detokenize" in fields:
        return "detokenize"
    return None


def _properties(document: dict[str, Any], node: object, depth: int) -> set[str]:
    """Property names of a schema node, following ``$ref`` and ``anyOf``/``oneOf``/``allOf``."""
    if depth > 8 or not isinstance(node, dict):
        return set()
    found = set(node.get("properties", {}) or {})
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/"):
        target: Any = document
        for part in ref[2:].split("/"):
            target = target.get(part, {}) if isinstance(target, dict) else {}
        found |= _properties(document, target, depth + 1)
    for key in ("anyOf", "oneOf", "allOf"):
        for option in node.get(key, []) or []:
            found |= _properties(document, option, depth + 1)
    return found


PROBE = SamplingRequest(
    prompt="specseed probe", seed=1, temperature=0.0, top_k=0, top_p=1.0, max_tokens=1
)


async def detect_dialect(client: CompletionClient, model: str) -> DialectDetection:
    """Ask ``/openapi.json``; if it says nothing, send one probe completion per dialect."""
    try:
        schema = await client.get_json("/openapi.json", retries=0)
    except (RequestRejected, MalformedResponse):
        schema = None
    found = dialect_from_openapi(schema)
    if found is not None:
        field = DIALECT_FIELD[found][0]
        return DialectDetection(found, "openapi", f"/openapi.json declares `{field}`")
    refused: list[str] = []
    for dialect in ("return_token_ids", "detokenize"):
        try:
            await client.complete(PROBE, model=model, dialect=dialect)
        except (RequestRejected, MalformedResponse) as exc:
            refused.append(f"{dialect}: {exc.message}")
            continue
        field, value = DIALECT_FIELD[dialect]
        return DialectDetection(
            dialect, "probe", f"a probe with `{field}: {str(value).lower()}` got token ids"
        )
    raise MalformedResponse(
        "the server returns no token ids in either dialect (" + "; ".join(refused) + ")"
    )
