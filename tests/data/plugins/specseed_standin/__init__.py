"""A stand-in for an engine's releases: one small pure-Python package whose behaviour depends
on the version it is installed as.

``tests/releases/test_sweep.py`` packs this file into wheels of ``specseed-standin`` at
several versions and sweeps them, each installed by uv into its own environment, as a real
engine's releases would be:

- before 1.0 the engine has no ``knob`` option: an audit that sets it is refused (exit 2),
  as a release lacking a knob refuses it;
- from 2.0 on it takes sampled requests' seeds from an engine-wide counter (the seed the
  request asked for is ignored), so seeded tokens change with uptime and neighbours;
- releases before 2.0 keep every token-level invariant.

It only returns tokens (no RNG state), like ``specseed_tokens_only``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from importlib import metadata

from pydantic import BaseModel, ConfigDict

from specseed.engine_adapters.base import EngineAdapter, RunPlan, warmup_requests
from specseed.engine_adapters.registry import EngineInfo, Package
from specseed.traces.records import TOKENS_ONLY, TraceRecorder

VOCAB = 1000
VERSION = tuple(int(part) for part in metadata.version("specseed-standin").split(".")[:2])
BROKEN_FROM = (2, 0)
"""The first version that ignores request seeds."""


if VERSION >= (1, 0):

    class StandinOptions(BaseModel):
        """Options of the stand-in engine (1.0 and later)."""

        model_config = ConfigDict(extra="forbid", frozen=True)
        knob: bool = False

else:

    class StandinOptions(BaseModel):  # type: ignore[no-redef]
        """Options of the stand-in engine before 1.0: no knob."""

        model_config = ConfigDict(extra="forbid", frozen=True)


def _token(*parts: object) -> int:
    digest = hashlib.blake2b(repr(parts).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") % VOCAB


ENGINE = EngineInfo(
    name="standin",
    adapter="specseed_standin:StandinEngine",
    summary="a test engine whose behaviour depends on its installed version",
    observability=TOKENS_ONLY,
    options="specseed_standin:StandinOptions",
    requires=("specseed_standin",),
    packages=(Package("specseed_standin", ("specseed-standin",), "stand-in engine"),),
)


class StandinEngine(EngineAdapter):
    info = ENGINE

    def encode(self, prompt: tuple[int, ...] | str) -> tuple[int, ...]:
        ids = tuple(prompt.encode()) if isinstance(prompt, str) else tuple(prompt)
        if any(not 0 <= t < VOCAB for t in ids):
            raise ValueError(f"prompt ids outside the vocabulary (size {VOCAB})")
        return ids

    def environment(self) -> dict[str, str]:
        return {"engine": "standin", "standin": ".".join(map(str, VERSION))}

    def serve(self, plan: RunPlan, recorder: TraceRecorder) -> Mapping[str, tuple[int, ...]]:
        counter = 0
        outputs = {}
        for request in (*warmup_requests(plan), *plan.prior_traffic, *plan.requests):
            prompt = self.encode(request.prompt)
            if request.greedy:
                stream: object = "greedy"
            elif request.seed is None or VERSION >= BROKEN_FROM:
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
