"""An async client for OpenAI-compatible ``/v1/completions`` that returns exact token ids.

It speaks the two token-id dialects servers use (``return_token_ids: true`` for vLLM and
SGLang, ``detokenize: false`` for trtllm-serve; both answer in ``choices[].token_ids``),
finds out which one its server speaks (from ``/openapi.json``, else by a probe request),
and retries 429, 5xx and connection errors with capped exponential backoff.

Retries are one small loop here rather than a library: the policy (which statuses, how long,
``Retry-After`` honoured, attempts counted per request for the trace) fits in twenty lines
that a reader can check, and httpx's own transport retries cover connection failures only,
not 429 or 5xx answers.

A server is untrusted input. Every attempt runs under one deadline (``request_timeout_s``
bounds the whole exchange, headers and body, not only the gap between bytes, so a body
trickled a byte at a time ends), a body is read by streaming up to ``max_response_bytes``
counted after decompression (an endless body or a gzip bomb is cut off; the client decodes
gzip and deflate itself, never more than the cap at a time, and refuses other encodings), redirects are never followed (a 3xx is an error naming where
it pointed), JSON nested deeper than the parser can take is a ``MalformedResponse``, and
token ids must be JSON integers in ``[0, 2**31)``. Text a server sends back is quoted with its
control characters escaped (``specseed.core.text.printable``).
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import time
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

import httpx
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from specseed.core.errors import SpecseedError
from specseed.core.text import printable
from specseed.core.wording import plural
from specseed.traces.records import FinishReason, TokenLogprob

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
    """The server refused the request (4xx other than 429, or a 3xx redirect that is not
    followed); retrying would not help."""

    def __init__(self, message: str, status: int, *, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.status = status


AUTH_HINT = (
    "the server refused the API key: check the variable engine.options.api_key_env names "
    "(and that it holds the key this server expects)"
)
"""The hint of a 401/403: the server is up, the credentials are wrong."""


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
    max_response_bytes: int = 16 * 1024 * 1024
    """Largest body read from one answer; a longer one is cut off as malformed. 16 MiB holds
    the token ids and text of far more tokens than any scenario asks for."""


@dataclass(frozen=True)
class Answer:
    """One HTTP answer, read whole within the limits."""

    status_code: int
    headers: httpx.Headers
    content: bytes

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", errors="replace")

    def json(self) -> Any:
        """The body as JSON; ``ValueError`` if it is not JSON or nests too deep to parse."""
        try:
            return json.loads(self.content)
        except RecursionError:
            # CPython's parser recurses per nesting level; a server must not crash us with
            # ``[[[[...`` 200,000 deep.
            raise ValueError("the JSON nests too deep") from None
        except UnicodeDecodeError:
            raise ValueError("the body is not UTF-8") from None


class ResponseTooLarge(Exception):
    """Raised inside ``_send`` when a body passes ``max_response_bytes``."""

    def __init__(self, decoded: bool) -> None:
        super().__init__()
        self.decoded = decoded


ACCEPT_ENCODING = "gzip, deflate"
"""The encodings asked for: the ones ``_BoundedBody`` decodes under the cap."""

_WBITS = {
    "identity": None,
    "gzip": 16 + zlib.MAX_WBITS,
    "x-gzip": 16 + zlib.MAX_WBITS,
    "deflate": zlib.MAX_WBITS,
}
"""zlib's window bits for each Content-Encoding decoded here (None: the bytes as sent)."""


class _BoundedBody:
    """A body assembled from raw network chunks, decoded here rather than by httpx so that
    the cap counts decoded bytes and no chunk expands past it: httpx decodes each network
    read whole, and 64 KB of gzip can become 64 MiB."""

    def __init__(self, content_encoding: str, cap: int) -> None:
        encoding = content_encoding.strip().lower() or "identity"
        if encoding not in _WBITS:
            raise MalformedResponse(
                f"the answer has Content-Encoding {printable(encoding, limit=80)!r}, which the "
                f"client cannot decode under its size cap (it asks for {ACCEPT_ENCODING})"
            )
        wbits = _WBITS[encoding]
        self.cap = cap
        self.raw_size = 0
        self.decoded = wbits is not None
        self.chunks: list[bytes] = []
        self.size = 0
        self._zlib = zlib.decompressobj(wbits) if wbits is not None else None
        self._raw_deflate = encoding == "deflate"

    def feed(self, raw: bytes) -> None:
        """Add one network chunk; ``ResponseTooLarge`` once the body would pass the cap."""
        self.raw_size += len(raw)
        if self.raw_size > self.cap:
            raise ResponseTooLarge(self.decoded)
        if self._zlib is None:
            self._keep(raw)
            return
        room = self.cap - self.size
        try:
            # max_length bounds what one call produces: one byte past the room proves the
            # body too long without ever holding more than the cap.
            out = self._zlib.decompress(raw, room + 1)
        except zlib.error:
            if not (self._raw_deflate and self.size == 0):
                raise MalformedResponse("the answer's compressed body is corrupt") from None
            # "deflate" sent as a bare deflate stream, without zlib's header (as httpx allows)
            self._raw_deflate = False
            self._zlib = zlib.decompressobj(-zlib.MAX_WBITS)
            out = self._zlib.decompress(raw, room + 1)
        self._raw_deflate = False
        self._keep(out)

    def _keep(self, data: bytes) -> None:
        self.size += len(data)
        if self.size > self.cap:
            raise ResponseTooLarge(self.decoded)
        self.chunks.append(data)

    def content(self) -> bytes:
        return b"".join(self.chunks)


TokenId = Annotated[int, Field(strict=True, ge=0, lt=2**31)]
"""A token id as a server must send it: a JSON integer, not a string, float or bool."""


@dataclass(frozen=True)
class Choice:
    """One choice of a completion (``n`` > 1 asks for several)."""

    token_ids: tuple[int, ...]
    finish_reason: FinishReason | None
    logprobs: tuple[TokenLogprob, ...] | None
    """What the server reported per token, where ``logprobs`` was asked (empty: it reported
    none)."""


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
    choices: tuple[Choice, ...] = ()
    """Every choice in ``index`` order (the first is ``token_ids``)."""


@dataclass(frozen=True)
class SamplingRequest:
    """What one completion asks for."""

    prompt: tuple[int, ...] | str
    seed: int | None
    temperature: float
    top_k: int
    top_p: float
    max_tokens: int
    knobs: Mapping[str, Any] = field(default_factory=dict)
    """The sampling knobs the request sets (``RequestPlan.knobs()``): each is sent, in the
    OpenAI field names and vLLM's extensions; unset ones are not."""

    @property
    def n(self) -> int:
        return int(self.knobs.get("n") or 1)


MAX_TOP_KEY = 64
"""Longest key of a ``top_logprobs`` entry read (``token_id:2147483647`` is 19 characters)."""

LogprobValue = Annotated[float | None, Field(strict=False)]


class _Logprobs(BaseModel):
    """``choices[].logprobs`` of the OpenAI completions API (the parts read)."""

    model_config = ConfigDict(extra="ignore")
    tokens: list[str] | None = None
    token_logprobs: list[LogprobValue] | None = None
    top_logprobs: list[dict[Annotated[str, Field(max_length=MAX_TOP_KEY)], float] | None] | None = (
        None
    )


class _Choice(BaseModel):
    model_config = ConfigDict(extra="ignore")
    index: int = Field(0, ge=0, lt=1 << 16)
    token_ids: list[TokenId] | None = None
    prompt_token_ids: list[TokenId] | None = None
    finish_reason: str | None = None
    logprobs: _Logprobs | None = None


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
    body.update(knob_fields(request.knobs, dialect))
    return body


def knob_fields(knobs: Mapping[str, Any], dialect: TokenIdDialect) -> dict[str, Any]:
    """The request fields of the knobs a request sets: OpenAI's names (``logit_bias`` with
    token ids as string keys, ``stop``, ``logprobs``, ``n``, the penalties) and vLLM's /
    SGLang's extensions where OpenAI has none (``min_p``, ``repetition_penalty``,
    ``stop_token_ids``, ``ignore_eos``; ``return_tokens_as_token_ids`` so that log-probability
    entries name token ids)."""
    fields: dict[str, Any] = {}
    for name, value in knobs.items():
        if name == "logit_bias":
            fields[name] = {str(token): bias for token, bias in value}
        elif isinstance(value, tuple):
            fields[name] = list(value)
        else:
            fields[name] = value
    if "logprobs" in knobs and dialect == "return_token_ids":
        fields["return_tokens_as_token_ids"] = True
    return fields


ERROR_TEXT_LIMIT = 300
"""Characters of a server's error text quoted in a message."""


def _error_message(response: Answer) -> str:
    """The server's own error text, from the OpenAI envelope or FastAPI's ``detail``,
    cut to a few hundred characters with control characters escaped."""
    return printable(_raw_error_message(response), limit=ERROR_TEXT_LIMIT)


def _raw_error_message(response: Answer) -> str:
    try:
        payload = response.json()
    except ValueError:
        return response.text[:ERROR_TEXT_LIMIT].strip() or f"HTTP {response.status_code}"
    if isinstance(payload, dict):
        error = payload.get("error")
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])[:ERROR_TEXT_LIMIT]
        if isinstance(error, str):
            return error
        if payload.get("message"):
            return str(payload["message"])[:ERROR_TEXT_LIMIT]
        if payload.get("detail"):
            return str(payload["detail"])[:ERROR_TEXT_LIMIT]
    return str(payload)[:ERROR_TEXT_LIMIT]


def _refusal(what: str, response: Answer) -> RequestRejected:
    """The error of a 3xx or 4xx answer: redirects name where they pointed, 401/403 say the
    key is wrong (the server is up)."""
    status = response.status_code
    if status < 400:
        location = printable(response.headers.get("location", "?"), limit=ERROR_TEXT_LIMIT)
        return RequestRejected(
            f"{what}: HTTP {status} redirects to {location}; redirects are not followed "
            "(a redirect could send the API key to another host)",
            status,
            hint="set engine.options.base_url to the address the server really answers on",
        )
    message = f"{what}: HTTP {status}: {_error_message(response)}"
    if status in (401, 403):
        return RequestRejected(message, status, hint=AUTH_HINT)
    return RequestRejected(message, status)


def _retry_after(response: Answer) -> float | None:
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


def _token_of(key: str) -> int | None:
    """The token id a ``top_logprobs`` key names (``token_id:N``), or None (text)."""
    if key.startswith("token_id:") and key[9:].isdigit() and len(key) <= 19:
        token = int(key[9:])
        return token if token < 2**31 else None
    return None


def _logprob(value: float | None) -> float:
    # A missing value (null) reads as NaN, which no check takes for a log-probability.
    return float("nan") if value is None else float(value)


def parse_logprobs(choice: _Choice, asked: int) -> tuple[TokenLogprob, ...]:
    """A choice's log-probabilities (empty when the server sent none), bounded: one entry per
    token id, at most ``asked`` + 1 top entries each (the chosen token may be added)."""
    reported = choice.logprobs
    tokens = choice.token_ids or []
    if reported is None or reported.token_logprobs is None:
        return ()
    values = reported.token_logprobs
    tops = reported.top_logprobs or [None] * len(values)
    if len(values) != len(tokens) or len(tops) != len(tokens):
        raise MalformedResponse(
            f"the completion's logprobs cover {len(values)} tokens, its token_ids {len(tokens)}"
        )
    out = []
    for value, top in zip(values, tops, strict=True):
        entries = top or {}
        if len(entries) > asked + 1:
            raise MalformedResponse(
                f"the completion reports {len(entries)} top log-probabilities for logprobs {asked}"
            )
        named = [(_token_of(k), _logprob(v)) for k, v in entries.items()]
        ranked = sorted(((t, v) for t, v in named if t is not None), key=lambda e: -e[1])
        out.append(TokenLogprob(_logprob(value), tuple((t, v) for t, v in ranked if t is not None)))
    return tuple(out)


def _finish(choice: _Choice) -> FinishReason | None:
    reason = choice.finish_reason
    if reason is None or reason in ("stop", "length"):
        return reason  # type: ignore[return-value]
    raise MalformedResponse(
        f"the completion's finish_reason is {printable(reason, limit=40)!r}, not stop or length"
    )


def parse_choices(
    payload: object, request: SamplingRequest
) -> tuple[tuple[_Choice, ...], tuple[Choice, ...]]:
    """Every choice of a completion body, in index order, each read as a ``Choice``."""
    try:
        body = _CompletionBody.model_validate(payload)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "body"
        why = printable(first["msg"], limit=ERROR_TEXT_LIMIT)
        if "token_ids" in where:
            why += " (token ids are non-negative JSON integers below 2**31)"
        raise MalformedResponse(
            f"the completion is not an OpenAI completion: {where}: {why}"
        ) from None
    n = request.n
    if not body.choices:
        raise MalformedResponse("the completion has no choices")
    if len(body.choices) != n:
        # Other than asked: no way to know which choice is which request's.
        raise MalformedResponse(
            f"the completion has {len(body.choices)} choices where {n} were asked for"
        )
    ordered = tuple(sorted(body.choices, key=lambda c: c.index))
    if [c.index for c in ordered] != list(range(n)):
        raise MalformedResponse(
            f"the completion's choices have indices {[c.index for c in ordered][:8]}, not 0 to "
            f"{n - 1}"
        )
    parsed = []
    for choice in ordered:
        _checked_choice(choice, request.max_tokens)
        asked = request.knobs.get("logprobs")
        logprobs = None if asked is None else parse_logprobs(choice, int(asked))
        parsed.append(Choice(tuple(choice.token_ids or ()), _finish(choice), logprobs))
    return ordered, tuple(parsed)


def _checked_choice(choice: _Choice, max_tokens: int) -> None:
    if choice.token_ids is None:
        raise MalformedResponse(
            f"the completion has no choices[{choice.index}].token_ids: the server ignored the "
            "token-id "
            "request field (a gateway may drop it, or the server speaks another dialect)"
        )
    if len(choice.token_ids) > max_tokens:
        raise MalformedResponse(
            f"the completion has {len(choice.token_ids)} token ids, more than max_tokens "
            f"{max_tokens}"
        )


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
        headers = {"Accept-Encoding": ACCEPT_ENCODING}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
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
    ) -> tuple[Answer, int]:
        """One call with retries on 429, 5xx and transport errors; (2xx/3xx/4xx answer,
        attempts)."""
        lim = self.limits
        attempt = 0
        while True:
            attempt += 1
            wait: float | None = None
            try:
                response = await self._attempt(method, path, body)
            except httpx.TransportError as exc:
                problem = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
                problem = printable(problem, limit=ERROR_TEXT_LIMIT)
            except TimeoutError:
                problem = (
                    f"no complete answer within request_timeout_s ({lim.request_timeout_s:g} s)"
                )
            except ResponseTooLarge as exc:
                decoded = " once decoded" if exc.decoded else ""
                raise MalformedResponse(
                    f"{method} {self.base_url}{path}: the answer is longer than "
                    f"{lim.max_response_bytes} bytes{decoded}; reading stopped there"
                ) from None
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

    async def _attempt(self, method: str, path: str, body: dict[str, Any] | None) -> Answer:
        """One HTTP exchange under one deadline, its body read up to the size cap."""
        lim = self.limits
        async with asyncio.timeout(lim.request_timeout_s):
            async with self._http.stream(method, path, json=body) as response:
                answer = _BoundedBody(
                    response.headers.get("content-encoding", ""), lim.max_response_bytes
                )
                async for chunk in response.aiter_raw():
                    answer.feed(chunk)
                return Answer(response.status_code, response.headers, answer.content())

    async def get_json(self, path: str, *, retries: int | None = None) -> Any:
        """GET a JSON document; ``RequestRejected`` on 4xx, ``MalformedResponse`` if not JSON."""
        response, _ = await self._send(
            "GET", path, None, self.limits.retries if retries is None else retries
        )
        if response.status_code >= 300:
            raise _refusal(f"GET {self.base_url}{path}", response)
        try:
            return response.json()
        except ValueError as exc:
            raise MalformedResponse(
                f"GET {self.base_url}{path}: the answer is not JSON ({exc})"[:400]
            ) from None

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
        if response.status_code >= 300:
            raise _refusal("the server refused a completion", response)
        try:
            payload = response.json()
        except ValueError as exc:
            raise MalformedResponse(
                f"the completion is not JSON ({printable(str(exc), limit=120)}): "
                f"{printable(response.text[:80])!r}"
            ) from None
        raw, choices = parse_choices(payload, request)
        first = raw[0]
        prompt_ids = None if first.prompt_token_ids is None else tuple(first.prompt_token_ids)
        return Completion(
            token_ids=choices[0].token_ids,
            prompt_token_ids=prompt_ids,
            finish_reason=choices[0].finish_reason,
            attempts=attempts,
            seconds=time.perf_counter() - started,
            choices=choices,
        )

    async def served_models(self) -> list[str]:
        """Model ids from ``/v1/models``."""
        payload = await self.get_json("/v1/models")
        data = payload.get("data") if isinstance(payload, dict) else None
        if not isinstance(data, list):
            raise MalformedResponse(f"{self.base_url}/v1/models has no data list")
        return [
            printable(item["id"], limit=200)
            for item in data
            if isinstance(item, dict) and isinstance(item.get("id"), str)
        ]


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
            if isinstance(exc, RequestRejected) and (exc.status < 400 or exc.status in (401, 403)):
                raise  # a wrong key or address, not a dialect the server lacks
            refused.append(f"{dialect}: {exc.message}")
            continue
        field, value = DIALECT_FIELD[dialect]
        return DialectDetection(
            dialect, "probe", f"a probe with `{field}: {str(value).lower()}` got token ids"
        )
    raise MalformedResponse(
        "the server returns no token ids in either dialect (" + "; ".join(refused) + ")"
    )
