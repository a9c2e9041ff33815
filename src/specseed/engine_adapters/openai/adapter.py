"""The ``openai`` engine: audit any OpenAI-compatible server from the outside, over HTTP.

What it observes: the token ids each request got back, and nothing else. No steps, batch
rows, RNG state or logits cross the API, so the trace of a run holds a header and an end
record; checks that need more skip with the reason. Batches are whatever the server's
scheduler makes of requests sent together (``traffic.py``).

One server cannot change its engine settings per request, so a scenario run that changes
one (``max_draft_len: 0``, ``overlap_scheduler``, ...) goes to the variant endpoint
configured for it under ``options.variants``; a run no endpoint serves is not sent at all,
and its trace says why, so that no comparison passes on two runs of the same configuration.
"""

from __future__ import annotations

import asyncio
import os
import platform
from dataclasses import dataclass, replace
from typing import NoReturn

from specseed.core.errors import EngineError, InputError
from specseed.core.secrets import hold, hold_url_credentials
from specseed.core.version import __version__
from specseed.engine_adapters.base import (
    EngineAdapter,
    EngineSettings,
    KnobRefused,
    RunPlan,
    RunStart,
    TrafficLimits,
    options_of,
)
from specseed.engine_adapters.openai.client import (
    ClientLimits,
    CompletionClient,
    DialectDetection,
    HttpEngineError,
    RequestRejected,
    ServerUnavailable,
    TokenIdDialect,
    detect_dialect,
)
from specseed.engine_adapters.openai.info import ENGINE, STOPPED_ANSWERING
from specseed.engine_adapters.openai.options import SERVER_SETTINGS, OpenAIOptions, check_api_key
from specseed.engine_adapters.openai.traffic import Replay, RunFailure, TrafficShape, replay_plan
from specseed.traces.records import TraceRecorder, child_id


@dataclass(frozen=True)
class Endpoint:
    """Where a run is sent."""

    base_url: str
    model: str | None
    label: str
    """``main``, or the variant's settings (``max_draft_len=0``)."""


@dataclass(frozen=True)
class ResolvedEndpoint:
    """An endpoint with its model id and token-id dialect found out."""

    endpoint: Endpoint
    model: str
    detection: DialectDetection


def read_api_key(env_name: str | None) -> str | None:
    """The API key from the named environment variable (never stored anywhere else; held by
    the scrubber, so that no output of this process carries it, whoever echoes it)."""
    if env_name is None:
        return None
    key = os.environ.get(env_name)
    hold(key)
    if not key:
        raise InputError(
            f"engine.options.api_key_env names {env_name}, which is not set",
            hint=f"export {env_name}=<key> before the audit",
        )
    check_api_key(key, f"${env_name} (engine.options.api_key_env)")
    return key


def _setting_text(settings: dict[str, object]) -> str:
    return ", ".join(f"{key}={value}" for key, value in settings.items())


def endpoint_for(
    base: EngineSettings, run: EngineSettings, options: OpenAIOptions
) -> Endpoint | str:
    """The endpoint that serves a run's settings, or why none does."""
    changed = {
        key: getattr(run, key) for key in SERVER_SETTINGS if getattr(run, key) != getattr(base, key)
    }
    if not changed:
        return Endpoint(options.base_url, options.model, "main")
    for variant in options.variants:
        wanted = {key: getattr(variant.when, key) for key in variant.when.model_fields_set}
        fits = set(changed) <= set(wanted) and all(
            getattr(run, key) == value for key, value in wanted.items()
        )
        if fits:
            return Endpoint(
                variant.base_url or options.base_url,
                variant.model or options.model,
                _setting_text(wanted),
            )
    when = ", ".join(
        f"{key}: {str(value).lower() if isinstance(value, bool) else value}"
        for key, value in changed.items()
    )
    return (
        f"the run sets {_setting_text(changed)}, which a client cannot change on a server, "
        "and no endpoint in engine.options.variants serves it; to serve it, add to "
        f"model.yaml's engine.options `variants: [{{when: {{{when}}}, base_url: "
        "http://HOST:PORT}]` (a server of the same model with those settings)"
    )


class HttpAuditor:
    """Sends run plans to OpenAI-compatible endpoints (the engine-independent half of the
    ``openai`` adapter: the adapter class wires it to the trace lifecycle)."""

    def __init__(self, settings: EngineSettings, options: OpenAIOptions) -> None:
        self.settings = settings
        self.options = options
        self._api_key = read_api_key(options.api_key_env)
        self.limits = ClientLimits(
            concurrency=options.concurrency,
            connect_timeout_s=options.connect_timeout_s,
            request_timeout_s=options.request_timeout_s,
            retries=options.retries,
            backoff_s=options.backoff_s,
            max_backoff_s=options.max_backoff_s,
        )
        self.shape = TrafficShape(
            concurrency=options.concurrency, arrival_step_s=options.arrival_step_s
        )
        self.extra: dict[str, object] = {"ignore_eos": True} if options.ignore_eos else {}
        self._resolved: dict[Endpoint, ResolvedEndpoint] = {}
        self._gone: str | None = None
        """Why the server stopped answering (later runs check once, then fail fast)."""

    def client(self, endpoint: Endpoint) -> CompletionClient:
        hold_url_credentials(endpoint.base_url)  # echoes of a URL's password are scrubbed too
        return CompletionClient(endpoint.base_url, api_key=self._api_key, limits=self.limits)

    def connect(self) -> ResolvedEndpoint:
        """Reach the main endpoint once: an unreachable server stops the audit (exit 3)."""
        main = Endpoint(self.options.base_url, self.options.model, "main")
        try:
            return asyncio.run(self._resolve_once(main))
        except HttpEngineError as exc:
            raise EngineError(
                f"cannot audit {self.options.base_url}: {exc.message}",
                hint=self._connect_hint(exc),
            ) from None

    def _connect_hint(self, exc: HttpEngineError) -> str:
        """The server answered 401/403: it is up, and wants an API key (or another one)."""
        if isinstance(exc, RequestRejected) and exc.status in (401, 403):
            env = self.options.api_key_env
            if env is None:
                return (
                    "the server wants an API key: put it in an environment variable and "
                    "name that variable in engine.options.api_key_env"
                )
            return f"the server refused the API key in ${env} (engine.options.api_key_env)"
        return exc.hint or "start the server first, or fix engine.options.base_url"

    async def _resolve_once(self, endpoint: Endpoint) -> ResolvedEndpoint:
        async with self.client(endpoint) as client:
            return await self._resolve(client, endpoint)

    async def _resolve(self, client: CompletionClient, endpoint: Endpoint) -> ResolvedEndpoint:
        known = self._resolved.get(endpoint)
        if known is not None:
            return known
        model = endpoint.model
        if model is None:
            models = await client.served_models()
            if not models:
                raise ServerUnavailable(f"{endpoint.base_url}/v1/models lists no model")
            model = models[0]
        configured = self.options.token_ids
        if configured == "auto":
            detection = await detect_dialect(client, model)
        else:
            dialect: TokenIdDialect = configured
            detection = DialectDetection(dialect, "configured", "engine.options.token_ids")
        resolved = ResolvedEndpoint(endpoint, model, detection)
        self._resolved[endpoint] = resolved
        return resolved

    def prepare(self, endpoint: Endpoint) -> ResolvedEndpoint | RunFailure:
        """The endpoint's model and dialect (cached), or why the server cannot be used."""
        return asyncio.run(self._prepare(endpoint))

    async def _prepare(self, endpoint: Endpoint) -> ResolvedEndpoint | RunFailure:
        async with self.client(endpoint) as client:
            try:
                if self._gone is not None:
                    # One quick look, no retries: a dead server fails each run at once.
                    await client.get_json("/v1/models", retries=0)
                    self._gone = None
                return await self._resolve(client, endpoint)
            except HttpEngineError as exc:
                if isinstance(exc, ServerUnavailable):
                    self._gone = exc.message
                return RunFailure("scenario", 0, type(exc).__name__, exc.message, exc)

    def replay(self, plan: RunPlan, resolved: ResolvedEndpoint) -> Replay:
        """Serve a plan on a prepared endpoint; a failure is in the replay, never raised."""
        return asyncio.run(self._replay(plan, resolved))

    async def _replay(self, plan: RunPlan, resolved: ResolvedEndpoint) -> Replay:
        async with self.client(resolved.endpoint) as client:
            replay = await replay_plan(
                client,
                plan,
                model=resolved.model,
                dialect=resolved.detection.dialect,
                shape=self.shape,
                extra=self.extra,
            )
            if replay.failure is not None:
                replay.failure = await self._still_there(client, replay.failure)
        if replay.failure is not None and replay.failure.exception == "ServerUnavailable":
            self._gone = replay.failure.message
        return replay

    async def _still_there(self, client: CompletionClient, failure: RunFailure) -> RunFailure:
        """After a failed run, one quick look (no retries) whether the server still answers:
        a server that died (an engine core that crashed on a batch takes ``vllm serve`` down
        with it) is told apart from one that failed this run's requests and lives on."""
        try:
            await client.get_json("/v1/models", retries=0)
        except ServerUnavailable as exc:
            if "HTTP " in exc.message:  # it answered, with an error
                return failure
            note = f"; {STOPPED_ANSWERING} ({exc.message})"
            error = failure.error
            if error is not None:
                error.message += note
                error.args = (error.message,)
            return replace(failure, message=failure.message + note, error=error)
        except HttpEngineError:
            return failure  # it answered
        return failure

    def describe(self, resolved: ResolvedEndpoint | None, endpoint: Endpoint) -> dict[str, object]:
        """What a trace records about the endpoint of a run (never the API key)."""
        record: dict[str, object] = {
            "base_url": endpoint.base_url,
            "endpoint": endpoint.label,
            "model": resolved.model if resolved else endpoint.model,
            "api_key_env": self.options.api_key_env,
            "concurrency": self.options.concurrency,
            "arrival_step_s": self.options.arrival_step_s,
            "retries": self.options.retries,
        }
        if resolved is not None:
            record["token_ids"] = resolved.detection.dialect
            record["token_ids_detected_by"] = (
                f"{resolved.detection.method}: {resolved.detection.detail}"
            )
        return record

    def environment(self) -> dict[str, str]:
        import httpx

        return {
            "specseed": __version__,
            "engine": "openai",
            "python": platform.python_version(),
            "httpx": httpx.__version__,
            "platform": platform.platform(),
            "base_url": self.options.base_url,
        }


class HttpRunFailed(Exception):
    """A run the server did not complete; the base class records it as the run's failure."""


class OpenAIEngine(EngineAdapter):
    """Any OpenAI-compatible server (trtllm-serve, vllm serve, SGLang, a gateway, ``specseed
    serve``), audited from its token ids."""

    info = ENGINE

    def __init__(self, settings: EngineSettings) -> None:
        super().__init__(settings)
        self.options: OpenAIOptions = options_of(settings, OpenAIOptions)
        self.auditor = HttpAuditor(settings, self.options)
        self.main = self.auditor.connect()
        """The main endpoint, reached once at start (model id, token-id dialect)."""
        self._endpoint: Endpoint | None = None
        self._prepared: ResolvedEndpoint | RunFailure | None = None

    def encode(self, prompt: tuple[int, ...] | str) -> tuple[int, ...]:
        if isinstance(prompt, str):
            return ()  # the server tokenizes text; the API does not say how
        negative = [t for t in prompt if t < 0]
        if negative:
            raise ValueError(f"prompt token ids {negative[:5]} are negative")
        return prompt

    def traffic_limits(self) -> TrafficLimits:
        # One server with its own settings: a run that changes them is served by a variant
        # endpoint or not at all, so traffic generated for it changes none.
        return TrafficLimits(fixed_settings=True)

    def environment(self) -> dict[str, str]:
        environment = self.auditor.environment()
        resolved = self._prepared if isinstance(self._prepared, ResolvedEndpoint) else None
        if self._endpoint is not None:
            record = self.auditor.describe(resolved, self._endpoint)
            environment.update({k: str(v) for k, v in record.items() if v is not None})
        return environment

    def start_run(self, plan: RunPlan) -> RunStart:
        # One server serves every run: no run starts on a fresh engine.
        endpoint = endpoint_for(self.settings, plan.settings, self.options)
        if isinstance(endpoint, str):
            self._endpoint, self._prepared = None, None
            return RunStart(fresh_engine=False, not_served=endpoint)
        self._endpoint = endpoint
        self._prepared = self.auditor.prepare(endpoint)
        return RunStart(fresh_engine=False)

    def serve(self, plan: RunPlan, recorder: TraceRecorder) -> dict[str, tuple[int, ...]]:
        prepared = self._prepared
        if prepared is None:
            raise HttpRunFailed("the run's endpoint was not prepared")
        if isinstance(prepared, RunFailure):
            _raise(prepared, recorder)
        replay = self.auditor.replay(plan, prepared)
        if replay.failure is not None:
            refused = _refusal(plan, replay.failure)
            if refused is not None:
                raise KnobRefused(refused)
            _raise(replay.failure, recorder)
        return _record_choices(plan, replay, recorder)


def _refusal(plan: RunPlan, failure: RunFailure) -> str | None:
    """The server's words, where it refused (400/422) a scenario request that sets knobs: an
    engine that says it cannot take a knob is honest, and the run is a skip, not a failure."""
    error = failure.error
    if failure.phase != "scenario" or not isinstance(error, RequestRejected):
        return None
    if error.status not in (400, 422):
        return None
    knobs = sorted({k for r in plan.requests for k in r.knobs()})
    if not knobs:
        return None
    return f"the run sends {', '.join(knobs)}; {error.message}"


def _record_choices(
    plan: RunPlan, replay: Replay, recorder: TraceRecorder
) -> dict[str, tuple[int, ...]]:
    """Each scenario request's tokens, its children's (``n``), and the finish reasons and
    log-probabilities the server reported, into the trace."""
    outputs = dict(replay.outputs)
    for request in plan.requests:
        completion = replay.completions.get(request.request_id)
        if completion is None:
            continue
        for index, choice in enumerate(completion.choices):
            rid = child_id(request.request_id, index)
            outputs[rid] = choice.token_ids
            recorder.finish(rid, choice.finish_reason, choice.logprobs)
    return outputs


def _raise(failure: RunFailure, recorder: TraceRecorder) -> NoReturn:
    """Re-raise a run's HTTP error (its type names the failure in the trace)."""
    recorder.at(-1, failure.phase, failure.batch_size)
    if failure.error is not None:
        raise failure.error
    raise HttpRunFailed(f"{failure.exception}: {failure.message}")
