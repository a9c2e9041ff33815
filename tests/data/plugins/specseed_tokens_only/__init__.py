"""A specseed engine from outside the package: it only returns tokens.

Used by tests/engine_adapters/test_plugin_engine.py, which installs it through the
``specseed.engines`` and ``specseed.contracts`` entry points of a distribution it writes.
Tokens are a pure function of (prompt, seed, position) for seeded and greedy requests, so the
token-level invariants hold; ``ignore_seed: true`` makes it take seeds from an engine-wide
counter instead, like TensorRT-LLM before its seed fix, so they break.

Everything specseed knows about the engine is its ``ENGINE`` below: adding it touched no file
of specseed (the test asserts that its packages, environment variables, placement and moved
option show up in ``specseed engines``, ``doctor``, a bundle and a report).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict

from specseed.core.contracts import IDEAL, RngContract
from specseed.engine_adapters.base import EngineAdapter, KnobRefused, RunPlan, warmup_requests
from specseed.engine_adapters.registry import EngineInfo, Package, Placement
from specseed.traces.records import TOKENS_ONLY, TraceRecorder

VOCAB = 1000


class TokensOnlyOptions(BaseModel):
    """Options of the tokens-only test engine."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    ignore_seed: bool = False


def _token(*parts: object) -> int:
    digest = hashlib.blake2b(repr(parts).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") % VOCAB


ENGINE = EngineInfo(
    name="tokens-only",
    adapter="specseed_tokens_only:TokensOnlyEngine",
    summary="a test engine that only returns tokens",
    observability=TOKENS_ONLY,
    options="specseed_tokens_only:TokensOnlyOptions",
    requires=("specseed_tokens_only",),
    packages=(Package("specseed_tokens_only", ("specseed-tokens-only",), "tokens-only engine"),),
    environment_variables=("TOKENS_ONLY_*",),
    placements=(Placement("cpu", "a hash of the seed", ready="pure Python, no torch"),),
    moved_options=frozenset({"ignore_seed"}),  # as if it had been a shared engine key once
)


class TokensOnlyEngine(EngineAdapter):
    info = ENGINE

    def encode(self, prompt: tuple[int, ...] | str) -> tuple[int, ...]:
        ids = tuple(prompt.encode()) if isinstance(prompt, str) else tuple(prompt)
        if any(not 0 <= t < VOCAB for t in ids):
            raise ValueError(f"prompt ids outside the vocabulary (size {VOCAB})")
        return ids

    def environment(self) -> dict[str, str]:
        return {"engine": "tokens-only"}

    def serve(self, plan: RunPlan, recorder: TraceRecorder) -> Mapping[str, tuple[int, ...]]:
        options = TokensOnlyOptions.model_validate(plan.settings.options.model_dump())
        if any(r.knobs() for r in plan.requests):  # it implements no other knob: it says so
            raise KnobRefused("tokens-only takes temperature, top_k and top_p only")
        counter = 0  # an engine-wide counter: unseeded requests, or every one if ignore_seed
        outputs = {}
        for request in (*warmup_requests(plan), *plan.prior_traffic, *plan.requests):
            prompt = self.encode(request.prompt)
            if request.greedy:
                stream: object = "greedy"
            elif request.seed is None or options.ignore_seed:
                stream, counter = ("counter", counter), counter + 1
            else:
                stream = ("seed", request.seed)
            tokens = tuple(
                _token(prompt, stream, request.temperature, request.top_k, request.top_p, i)
                for i in range(request.max_tokens)
            )
            if request.phase == "scenario":
                outputs[request.request_id] = tokens
        return outputs


CONTRACT = RngContract(
    name="tokens-only-layout",
    summary="the ideal layout under another name (a contract from another package)",
    unseeded=IDEAL.unseeded,
    row_subsequence=IDEAL.row_subsequence,
    slot_stride=IDEAL.slot_stride,
    separate_target_slots=IDEAL.separate_target_slots,
)
