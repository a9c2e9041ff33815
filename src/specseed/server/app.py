"""The ASGI application of ``specseed serve``: the reference engine behind an OpenAI API.

Routes: ``POST /v1/completions``, ``GET /v1/models``, ``GET /health`` (and FastAPI's own
``/openapi.json``). Every request handler hands its request to the one :class:`LiveEngine`
thread and awaits the result, so concurrent requests share engine steps. With an API key,
``/v1/*`` needs ``Authorization: Bearer <key>``; ``/health`` stays open for probes.
Errors use the OpenAI envelope (``{"error": {"message", "type", "code"}}``).

Limits (``ServeLimits``; the socket-level ones are in ``server/limits.py``): at most
``max_queued`` completions wait for an engine slot, a request past that is a 429 with
``Retry-After``; a completion whose client hung up is dropped from the engine at the next
step (``LiveEngine.cancel``), so nobody waits behind work no one will read; while the server
shuts down, a request it cannot finish is a 503 with ``Retry-After``, never a cancelled task.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from specseed.core.version import __version__
from specseed.engine_adapters.base import RequestPlan
from specseed.engine_adapters.reference.live import LiveEngine, LiveResult
from specseed.server.protocol import (
    MAX_BODY_BYTES,
    CompletionChoice,
    CompletionLogprobs,
    CompletionRequest,
    CompletionResponse,
    ModelCard,
    ModelList,
    Usage,
    decode_text,
    error_body,
)

DEFAULT_MODEL_NAME = "specseed-reference"
RETRY_AFTER_S = 1
"""What a 429 (queue full) or a 503 (shutting down) tells the client to wait, in seconds."""

_bearer = HTTPBearer(auto_error=False)


LOGPROB_FLOOR = -9999.0
"""What a log-probability of -inf is written as (JSON has no infinity; vLLM writes this)."""


def _logprobs(result: LiveResult, as_ids: bool) -> CompletionLogprobs | None:
    """A choice's log-probabilities in the OpenAI completions form; tokens named by their
    text, or ``token_id:<id>`` (vLLM's ``return_tokens_as_token_ids``)."""
    if result.logprobs is None:
        return None

    def name(token: int) -> str:
        return f"token_id:{token}" if as_ids else decode_text([token])

    def finite(value: float) -> float:
        return value if value > LOGPROB_FLOOR else LOGPROB_FLOOR

    tokens = list(result.output_ids)
    offsets, offset = [], 0
    for token in tokens:
        offsets.append(offset)
        offset += len(decode_text([token]))
    return CompletionLogprobs(
        tokens=[name(t) for t in tokens],
        token_logprobs=[finite(x.logprob) for x in result.logprobs],
        top_logprobs=[{name(t): finite(v) for t, v in x.top} for x in result.logprobs],
        text_offset=offsets,
    )


def _settle(future: asyncio.Future[LiveResult], result: LiveResult) -> None:
    if not future.done():  # the client may have gone away
        future.set_result(result)


class BodyLimit:
    """ASGI middleware: a request body past ``limit`` bytes is a 413, whether it declares its
    length or streams chunks; the rest is never read."""

    def __init__(self, app: ASGIApp, *, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.limit):
            await self._too_large(send)
            return
        seen = 0
        started = False

        async def limited() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    # An HTTPException: FastAPI passes those on (any other error while it
                    # reads the body becomes its own 400).
                    raise _BodyTooLarge(413, f"the request body is larger than {self.limit} bytes")
            return message

        async def tracking(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, limited, tracking)
        except _BodyTooLarge:
            if not started:
                await self._too_large(send)

    async def _too_large(self, send: Send) -> None:
        message = f"the request body is larger than {self.limit} bytes"
        response = JSONResponse(error_body(message, "invalid_request_error", 413), status_code=413)
        await response({"type": "http"}, _no_body, send)


class _BodyTooLarge(HTTPException):
    pass


async def _no_body() -> Message:
    return {"type": "http.request", "body": b"", "more_body": False}


def _deliverer(
    loop: asyncio.AbstractEventLoop, future: asyncio.Future[LiveResult]
) -> Callable[[LiveResult], None]:
    def deliver(result: LiveResult) -> None:  # runs on the engine thread
        loop.call_soon_threadsafe(_settle, future, result)

    return deliver


async def _hung_up(request: Request) -> None:
    """Return once the client of ``request`` has gone (its body is read by then: the next
    ASGI message is the disconnect)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


def _busy(message: str, status: int, kind: str) -> JSONResponse:
    return JSONResponse(
        error_body(message, kind, status),
        status_code=status,
        headers={"Retry-After": str(RETRY_AFTER_S)},
    )


def create_app(
    live: LiveEngine,
    *,
    model_name: str = DEFAULT_MODEL_NAME,
    api_key: str | None = None,
    max_queued: int | None = None,
) -> FastAPI:
    """The FastAPI app serving ``live``; starts and stops its engine thread with the app.

    ``max_queued``: completions that may wait for an engine slot beyond the
    ``max_num_requests`` the engine runs at once (None: no bound); one more is a 429."""

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        live.start()
        try:
            yield
        finally:
            live.stop()

    app = FastAPI(title="specseed serve", version=__version__, lifespan=lifespan)
    app.add_middleware(BodyLimit, limit=MAX_BODY_BYTES)
    served = {"completions": 0, "in_flight": 0, "refused_busy": 0}
    max_in_flight = None if max_queued is None else live.settings.max_num_requests + max_queued

    # async: FastAPI runs a plain def dependency on a thread pool, and the hop let requests
    # sent in one order reach the engine in another (the batch's rows with them).
    async def authorize(
        credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
    ) -> None:
        if api_key is None:
            return
        given = credentials.credentials if credentials is not None else ""
        if not secrets.compare_digest(given.encode(), api_key.encode()):
            raise HTTPException(401, "missing or wrong API key (Authorization: Bearer ...)")

    @app.exception_handler(HTTPException)
    async def _http_error(_: Request, exc: HTTPException) -> JSONResponse:
        kind = "authentication_error" if exc.status_code == 401 else "invalid_request_error"
        if exc.status_code >= 500:
            kind = "server_error"
        return JSONResponse(
            error_body(str(exc.detail), kind, exc.status_code), status_code=exc.status_code
        )

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc'] if p != 'body')}: {err['msg']}"
            for err in exc.errors()
        )
        return JSONResponse(error_body(problems, "invalid_request_error", 400), status_code=400)

    @app.get("/health")
    async def health() -> JSONResponse:
        if not live.running:
            return JSONResponse(
                error_body("the engine thread is not running", "server_error", 503),
                status_code=503,
            )
        return JSONResponse(
            {
                "status": "ok",
                "engine_steps": live.steps,
                "largest_batch": live.largest_batch,
                "engine_failures": live.failures,
                "completions": served["completions"],
                "in_flight": served["in_flight"],
                "cancelled": live.cancelled,
                "refused_busy": served["refused_busy"],
            }
        )

    @app.get("/v1/models", dependencies=[Depends(authorize)])
    async def models() -> ModelList:
        return ModelList(data=[ModelCard(id=model_name)])

    @app.post(
        "/v1/completions",
        dependencies=[Depends(authorize)],
        response_model=CompletionResponse,
        response_model_exclude_none=True,
    )
    async def completions(
        body: CompletionRequest, request: Request
    ) -> CompletionResponse | Response:
        if body.stream:
            raise HTTPException(400, "stream: streaming is not served; send stream: false")
        if body.model is not None and body.model != model_name:
            raise HTTPException(404, f"the model {body.model!r} does not exist")
        if not live.running:
            raise HTTPException(503, "the engine thread is not running")
        if len(body.prompt) == 0:
            raise HTTPException(400, "prompt: the prompt is empty")
        vocab = live.engine.vocab_size
        if isinstance(body.prompt, list):
            bad = [t for t in body.prompt if not 0 <= t < vocab]
            if bad:
                raise HTTPException(
                    400, f"prompt: token ids {bad[:5]} are outside the vocabulary (size {vocab})"
                )
        # Checked here, before the request joins a batch: a request the engine cannot hold
        # would fail the step, and with it every other request in flight.
        prompt = tuple(body.prompt) if isinstance(body.prompt, list) else body.prompt
        needed = len(live.engine.encode(prompt)) + body.max_tokens + live.lookahead
        if needed > live.capacity:
            raise HTTPException(
                400,
                f"prompt + max_tokens: the request needs {needed} KV positions (prompt "
                f"{needed - body.max_tokens - live.lookahead}, max_tokens {body.max_tokens}, "
                f"draft lookahead {live.lookahead}); this engine holds {live.capacity} per "
                "request. Shorten the prompt or lower max_tokens.",
            )
        plan = RequestPlan(
            request_id=live.new_request_id(),
            prompt=prompt,
            seed=body.seed,
            temperature=body.temperature,
            # top_k at or past the vocabulary keeps every token: no filter, as in vLLM.
            top_k=0 if body.top_k >= vocab else max(body.top_k, 0),
            top_p=body.top_p,
            max_tokens=body.max_tokens,
            **body.knobs(),
        )
        if max_in_flight is not None and served["in_flight"] >= max_in_flight:
            served["refused_busy"] += 1
            return _busy(
                f"the server is busy: {served['in_flight']} completions are running or queued "
                f"(at most {max_in_flight}); retry after {RETRY_AFTER_S} s",
                429,
                "rate_limit_error",
            )
        loop = asyncio.get_running_loop()
        # Each child of n is a request of its own, on a stream of its own (seed + i).
        children = live.children_of(plan)
        futures: list[asyncio.Future[LiveResult]] = [loop.create_future() for _ in children]
        served["in_flight"] += len(children)
        watcher = asyncio.ensure_future(_hung_up(request))
        answered = asyncio.gather(*futures)
        try:
            for child, future in zip(children, futures, strict=True):
                live.submit(child, _deliverer(loop, future))
            racing: set[asyncio.Future[Any]] = {answered, watcher}
            await asyncio.wait(racing, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            # Cancelled from outside (a forced shutdown): drop the work, answer what we can.
            for child in children:
                live.cancel(child.request_id)
            return _busy("the server is shutting down", 503, "server_error")
        finally:
            served["in_flight"] -= len(children)
            watcher.cancel()
        if not answered.done():  # the client hung up first: nobody reads the answer
            answered.cancel()
            for child in children:
                live.cancel(child.request_id)
            return Response(status_code=499)
        results = list(answered.result())
        gone = next((r for r in results if r.unavailable), None)
        if gone is not None:
            return _busy(f"{gone.error}; retry after {RETRY_AFTER_S} s", 503, "server_error")
        served["completions"] += 1
        failed = next((r.error for r in results if r.error is not None), None)
        if failed is not None:
            raise HTTPException(500, f"the engine failed while serving this request: {failed}")
        with_ids = body.return_token_ids or not body.detokenize
        choices = [
            CompletionChoice(
                index=index,
                text=decode_text(list(result.output_ids)),
                token_ids=list(result.output_ids) if with_ids else None,
                prompt_token_ids=list(result.prompt_ids) if body.return_token_ids else None,
                finish_reason=result.finish_reason or "length",
                logprobs=_logprobs(result, body.return_tokens_as_token_ids),
            )
            for index, result in enumerate(results)
        ]
        prompt_ids = results[0].prompt_ids
        generated = sum(len(r.output_ids) for r in results)
        return CompletionResponse(
            id=f"cmpl-{plan.request_id}",
            created=int(time.time()),
            model=model_name,
            choices=choices,
            usage=Usage(
                prompt_tokens=len(prompt_ids),
                completion_tokens=generated,
                total_tokens=len(prompt_ids) + generated,
            ),
        )

    return app
