"""``engine.name: openai``: what specseed knows about an OpenAI-compatible server without
importing the HTTP client."""

from __future__ import annotations

from specseed.engine_adapters.registry import EngineInfo, Placement
from specseed.traces.records import Observability

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
