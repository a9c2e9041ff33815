"""The command line of vLLM's OpenAI server for an audit's engine settings (no vLLM import):
what ``specseed sweep --via http`` starts for each release, on loopback.

The same settings as the in-process adapter (``VllmEngine.llm_kwargs``), as server flags: one
process on one thread (``VLLM_ENABLE_V1_MULTIPROCESSING=0``, ``--distributed-executor-backend
uni``, ``OMP_NUM_THREADS=1``), no torch.compile (``--enforce-eager``), the KV cache in GiB
from ``VLLM_CPU_KVCACHE_SPACE`` (the CPU build reserves far more otherwise), and the
speculative config spelled as the release spells it (:mod:`.versions`). The module is run as
``python -m vllm.entrypoints.openai.api_server``: the CPU build's ``vllm`` console script
fails on its distribution name (``vllm-cpu``) in 0.32.0.
"""

from __future__ import annotations

import json
from typing import Any

from specseed.core.errors import EngineError
from specseed.engine_adapters.base import EngineSettings, options_of
from specseed.engine_adapters.vllm.options import VllmOptions
from specseed.engine_adapters.vllm.versions import SHARED_VALUES, row_for

SERVER_MODULE = "vllm.entrypoints.openai.api_server"
SERVED_NAME = "specseed"
SERVER_ENVIRONMENT = {
    "VLLM_CPU_KVCACHE_SPACE": "1",
    "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
    "OMP_NUM_THREADS": "1",
}


def speculative_config(settings: EngineSettings, version: str) -> dict[str, Any] | None:
    """The ``--speculative-config`` of ``settings`` on release ``version`` (None: no
    speculation). ``EngineError`` for a value the release cannot take."""
    if settings.max_draft_len <= 0:
        return None
    opts = options_of(settings, VllmOptions)
    row = row_for(version)
    values = row.speculative_values if row is not None else SHARED_VALUES
    config: dict[str, Any] = {
        "method": opts.speculative_method,
        "num_speculative_tokens": settings.max_draft_len,
    }
    for key in ("draft_sample_method", "rejection_sample_method"):
        value = getattr(opts, key)
        if value not in values.get(key, {}):
            raise EngineError(f"vLLM {version} cannot take {key} {value!r} (the release lacks it)")
        mapped = values[key][value]
        if mapped is not None:
            config[key] = mapped
    if opts.speculative_method in ("eagle3", "eagle", "draft_model"):
        if settings.draft_checkpoint is None:
            raise EngineError(f"speculative method {opts.speculative_method} needs a draft")
        config["model"] = str(settings.draft_checkpoint)
    elif opts.speculative_method == "ngram":
        config["prompt_lookup_min"] = opts.prompt_lookup_min
        config["prompt_lookup_max"] = opts.prompt_lookup_max
    if opts.synthetic_acceptance_rates is not None:
        config["synthetic_acceptance_rates"] = list(opts.synthetic_acceptance_rates)
    config.update(opts.speculative_config)
    return config


def server_arguments(settings: EngineSettings, version: str, port: int) -> list[str]:
    """``-m vllm.entrypoints.openai.api_server ...`` for ``settings`` on ``version``,
    listening on 127.0.0.1:``port``."""
    if settings.checkpoint is None:
        raise EngineError("engine 'vllm' needs engine.checkpoint")
    opts = options_of(settings, VllmOptions)
    row = row_for(version)
    if opts.use_fp64_gumbel and (row is None or "use_fp64_gumbel" not in row.engine_keywords):
        raise EngineError(f"vLLM {version} cannot take use_fp64_gumbel (the release lacks it)")
    args = [
        "-m", SERVER_MODULE,
        "--model", str(settings.checkpoint), "--tokenizer", str(settings.checkpoint),
        "--served-model-name", SERVED_NAME,
        "--host", "127.0.0.1", "--port", str(port),
        "--dtype", opts.dtype, "--seed", str(opts.seed),
        "--max-model-len", str(opts.max_model_len),
        "--max-num-seqs", str(settings.max_num_requests),
        "--distributed-executor-backend", "uni",
        "--enforce-eager" if opts.enforce_eager else "--no-enforce-eager",
        "--async-scheduling" if settings.overlap_scheduler else "--no-async-scheduling",
    ]  # fmt: skip
    if opts.use_fp64_gumbel:
        args.append("--use-fp64-gumbel")
    speculative = speculative_config(settings, version)
    if speculative is not None:
        args += ["--speculative-config", json.dumps(speculative)]
    return args


__all__ = [
    "SERVED_NAME",
    "SERVER_ENVIRONMENT",
    "SERVER_MODULE",
    "server_arguments",
    "speculative_config",
]
