"""``engine.name: openai``: what specseed knows about an OpenAI-compatible server without
importing the HTTP client."""

from __future__ import annotations

from specseed.engine_adapters.registry import EngineInfo, Placement
from specseed.traces.records import Observability

SERVER_FAILURES = frozenset({"ServerUnavailable", "RequestRejected", "MalformedResponse"})
"""The failures a run's trace records when the server did not serve it (the client's typed
errors, ``client.py``): the server's doing, never a crash of the engine's code or of
specseed's client."""
STOPPED_ANSWERING = "afterwards the server did not answer at all"
"""What a run's failure adds when the server, asked once more after the failure, gave no
answer: it died, rather than failing this run's requests."""

ENGINE = EngineInfo(
    name="openai",
    adapter="specseed.engine_adapters.openai.adapter:OpenAIEngine",
    summary="any OpenAI-compatible server over HTTP (vllm serve, trtllm-serve, SGLang, "
    "a gateway, specseed serve)",
    observability=Observability(
        steps=False,
        rng_state=None,
        drafts=False,
        logits=False,
        notes="token ids only, over HTTP; batches are whatever the server makes of "
        "concurrent requests",
    ),
    options="specseed.engine_adapters.openai.options:OpenAIOptions",
    requires=("httpx",),
    install="pip install 'specseed[http]'",
    placements=(Placement("server", "the server's"),),
)
