"""``specseed serve``: the reference engine behind an OpenAI-compatible API."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from specseed.cli.error_boundary import error_boundary
from specseed.core.errors import InputError
from specseed.server.limits import ServeLimits

SERVE_HELP = """Serve the reference engine (its contract and any injected defects
from MODEL_YAML) over an OpenAI-compatible API: POST /v1/completions (prompt
text or token ids; seed, temperature, top_k, top_p, max_tokens; token ids with
return_token_ids: true or detokenize: false), GET /v1/models, GET /health.
Concurrent requests share engine steps.

[bold]Examples[/]

  specseed serve
  specseed serve model.yaml --port 8000
  SPECSEED_KEY=$(cat key.txt) specseed serve --api-key-env SPECSEED_KEY

Listens on loopback unless --host says otherwise. --port 0 takes a free port;
the first line printed is the URL.

Bounded against clients that hold it: past --max-connections a new connection
is answered 503, past --max-queued waiting completions a request is answered
429 (both with Retry-After); a client has --request-timeout seconds to send
its request; a completion whose client hung up is dropped; on SIGTERM or
Ctrl+C every request in flight gets its completion or a 503 before the exit.

Exit codes: 2 bad input, 3 the engine could not load, 130/143 stopped by
Ctrl+C/SIGTERM.
"""


def serve(
    model_yaml: Annotated[
        Path | None,
        typer.Argument(
            help="model.yaml whose engine section (reference) to serve (default: the "
            "built-in tiny model, ideal contract, no defects).",
            show_default=False,
            metavar="MODEL_YAML",
        ),
    ] = None,
    host: Annotated[str, typer.Option("--host", help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[
        int, typer.Option("--port", min=0, max=65535, help="Port (0 = any free port).")
    ] = 8000,
    api_key_env: Annotated[
        str | None,
        typer.Option(
            "--api-key-env",
            help="Name of an environment variable holding the API key clients must send "
            "as 'Authorization: Bearer KEY' (default: no key).",
            metavar="VAR",
        ),
    ] = None,
    model_name: Annotated[
        str, typer.Option("--model-name", help="Model id served in /v1/models.")
    ] = "specseed-reference",
    max_connections: Annotated[
        int,
        typer.Option(
            "--max-connections",
            min=1,
            max=65536,
            help="Open connections at once; one more is answered 503.",
        ),
    ] = ServeLimits.max_connections,
    max_queued: Annotated[
        int,
        typer.Option(
            "--max-queued",
            min=1,
            max=65536,
            help="Completions waiting for an engine slot; one more is answered 429.",
        ),
    ] = ServeLimits.max_queued,
    request_timeout: Annotated[
        float,
        typer.Option(
            "--request-timeout",
            min=0.05,
            max=3600.0,
            help="Seconds a client has to send a whole request.",
        ),
    ] = ServeLimits.request_timeout_s,
    batch_window_ms: Annotated[
        float,
        typer.Option(
            "--batch-window-ms",
            min=0.0,
            max=1000.0,
            help="How long an idle engine keeps gathering requests before its first step: "
            "until none has come for this long.",
        ),
    ] = 200.0,
) -> None:
    from specseed.engine_adapters.base import options_of
    from specseed.engine_adapters.reference.options import ReferenceOptions
    from specseed.plan.resolve import resolve_audit
    from specseed.server.launch import ServeOptions, is_loopback, require_http_extra
    from specseed.server.launch import serve as run_server

    err = Console(stderr=True)
    with error_boundary():
        require_http_extra()
        # The engine section only: serving reads no scenario.
        settings = resolve_audit(model_yaml, scenarios=False).engine
        api_key = None
        if api_key_env is not None:
            api_key = os.environ.get(api_key_env)
            if not api_key:
                raise InputError(
                    f"--api-key-env {api_key_env}: that environment variable is not set",
                    hint=f"export {api_key_env}=... first, or leave out --api-key-env",
                )
            from specseed.engine_adapters.openai.options import check_api_key

            check_api_key(api_key, f"${api_key_env} (--api-key-env)")
        if not is_loopback(host) and api_key is None:
            err.print(
                f"[yellow]warning:[/] listening on {host} with no API key: anyone who can "
                "reach it can use it (see --api-key-env)"
            )
        options = ServeOptions(
            host=host,
            port=port,
            model_name=model_name,
            api_key=api_key,
            batch_window_s=batch_window_ms / 1000.0,
            limits=ServeLimits(
                max_connections=max_connections,
                max_queued=max_queued,
                request_timeout_s=request_timeout,
            ),
        )

        def listening(url: str) -> None:
            # The URL goes first and alone on stdout: scripts read it (with --port 0).
            typer.echo(url)
            options = options_of(settings, ReferenceOptions)
            defects = ", ".join(options.defects) or "none"
            err.print(
                f"specseed serve: reference engine on {settings.device}, rng_profile "
                f"{options.rng_profile or settings.contract}, defects: {defects}, "
                f"max_num_requests "
                f"{settings.max_num_requests}, max_draft_len {settings.max_draft_len}; "
                "Ctrl+C stops"
            )

        run_server(settings, options, on_listening=listening)
