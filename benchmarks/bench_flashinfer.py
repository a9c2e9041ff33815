"""flashinfer sampling through specseed's backend and tap, against the raw kernels (GPU only).

    python benchmarks/bench_flashinfer.py [--batch 1024] [--vocab 128256] [--iters 50]
        [--baseline-tap FILE] [--breakdown] [--engine] [--engine-tokens 64]

Prints, side by side in one run, per call (median of ``--iters`` calls after warm-up, each
timed from the call until the GPU finished it, inputs already on the GPU):

1. ``sampling_from_probs``, ``top_k_top_p_sampling_from_probs`` (joint) and
   ``chain_speculative_sampling`` (K = 3): the raw ``flashinfer.sampling`` call, the same call
   through ``FlashinferBackend`` (kernel-row subsequence: one launch), and the ratio (goal:
   within 1.1x). The top-k/top-p row asks the backend for no draw counts (the count replays on
   the CPU twin, which is an audit cost, not a sampling cost).
2. the raw call with the flashinfer tap installed, and the tap's overhead as a ratio (goal:
   within 1.3x): loops of ``--iters`` calls ("loop": the raw calls, ms per call), the tapped
   loop including the read of ``tap.calls`` that copies the recordings to the host ("copy"),
   and that read plus the last call's rows ("tapped", the measure of earlier runs); "+rows"
   builds every row of every call (what an audit reads afterwards, once, after the run); with
   ``--baseline-tap FILE`` (a ``flashinfer_tap.py`` of another commit) "b.tap" and "b.copy"
   are that tap's "tapped" and "copy", measured in the same run. ``--breakdown`` adds where a
   tapped loop's time goes, per tap: host microseconds per call (no synchronisation), the
   read of ``calls`` and the last call's rows (ms, after the GPU finished), and the loop with
   the raw call followed by two small copy kernels and no Python ("2 copies": what a tapped
   call's device copies cost alone);
3. the backend serving the ``ideal`` contract (subsequence 0 for every row), which takes one
   launch per row.

With ``--engine``: the reference engine's generated tokens per second on CUDA with a
254M-parameter Llama written as a bf16 checkpoint (vocab 32000, hidden 1024, 16 layers,
16 heads / 8 KV heads, SwiGLU 2816; the engine computes in float32), 16 sampled requests, with
K = 3 and without speculation, sampling on the CPU twins and on flashinfer.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import importlib.util
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import torch
from perf_page import add_write_docs, docs_section

from specseed.sampling.backend import FlashinferBackend, make_backend
from specseed.taps.flashinfer_tap import FlashinferTap


def per_call_ms(fn: Callable[[], object], iters: int, warmup: int = 3) -> float:
    """Median milliseconds per call, from the call to its results being on the GPU
    (synchronised after each call, so host-side work of the wrappers counts)."""
    return wall_ms(fn, iters, warmup)


def loop_ms(fn: Callable[[], object], iters: int, finish: Callable[[], object]) -> float:
    """Milliseconds per call of ``iters`` back-to-back calls and one ``finish`` (median of 5
    loops; one synchronisation per loop, as an engine step would have)."""
    fn()
    finish()
    torch.cuda.synchronize()
    loops = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(iters):
            fn()
        finish()
        torch.cuda.synchronize()
        loops.append((time.perf_counter() - start) * 1e3 / iters)
    return statistics.median(loops)


def wall_ms(fn: Callable[[], object], iters: int, warmup: int = 1) -> float:
    """Median wall milliseconds per call (for calls that synchronise themselves)."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        start = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def host_us(fn: Callable[[], object], iters: int) -> float:
    """Median host microseconds per call of ``iters`` calls issued without synchronising
    (5 loops; the GPU runs behind)."""
    loops = []
    for _ in range(5):
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(iters):
            fn()
        loops.append((time.perf_counter() - start) * 1e6 / iters)
    torch.cuda.synchronize()
    return statistics.median(loops)


def tapped_parts(
    tap_class: type[FlashinferTap], fs: object, fn: Callable[[], object], iters: int
) -> tuple[float, float, float]:
    """A tap's (host us per call, ms to read ``calls`` once the GPU finished, ms to build the
    last call's rows), medians of 5 loops of ``iters`` calls."""
    host, read, rows = [], [], []
    with tap_class(fs) as tap:  # type: ignore[arg-type]
        fn()
        len(tap.calls[-1].rows)
        for _ in range(5):
            torch.cuda.synchronize()
            start = time.perf_counter()
            for _ in range(iters):
                fn()
            host.append((time.perf_counter() - start) * 1e6 / iters)
            torch.cuda.synchronize()
            start = time.perf_counter()
            calls = tap.calls
            read.append((time.perf_counter() - start) * 1e3)
            start = time.perf_counter()
            len(calls[-1].rows)
            rows.append((time.perf_counter() - start) * 1e3)
    return statistics.median(host), statistics.median(read), statistics.median(rows)


def two_copies(fn: Callable[[], object], seeds: torch.Tensor, offsets: torch.Tensor) -> object:
    """A raw call, then two small copy kernels as a tapped call makes (seed/offset, tokens)."""
    result = fn()
    tokens = result[0] if isinstance(result, tuple) else result
    assert isinstance(tokens, torch.Tensor)
    return torch.cat((seeds, offsets)), tokens.clone()


def none() -> None:
    return None


def load_tap(path: str | None) -> type[FlashinferTap] | None:
    """``FlashinferTap`` of another copy of the tap module (the side-by-side baseline)."""
    if not path:
        return None
    spec = importlib.util.spec_from_file_location("baseline_flashinfer_tap", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module.FlashinferTap  # type: ignore[no-any-return]


def read_all(tap: FlashinferTap) -> int:
    """Every row of every call, then a fresh list (each loop reads only its own calls)."""
    rows = sum(len(call.rows) for call in tap.calls)
    tap.calls.clear()
    return rows


def kernels(
    batch: int, vocab: int, iters: int, baseline: str | None = None, breakdown: bool = False
) -> None:
    base_tap = load_tap(baseline)
    backend = make_backend("flashinfer", "cuda")
    assert isinstance(backend, FlashinferBackend)
    fs = backend.fs
    dev = torch.device("cuda")
    gen = torch.Generator(device=dev).manual_seed(0)
    probs = torch.softmax(torch.randn(batch, vocab, device=dev, generator=gen) * 2, -1)
    seeds = torch.randint(0, 2**62, (batch,), device=dev, generator=gen, dtype=torch.int64)
    offsets = torch.randint(0, 2**20, (batch,), device=dev, generator=gen, dtype=torch.int64) * 4
    top_k = torch.full((batch,), 50, dtype=torch.int32, device=dev)
    top_p = torch.full((batch,), 0.9, dtype=torch.float32, device=dev)
    k = 3
    draft = torch.softmax(torch.randn(batch, k, vocab, device=dev, generator=gen) * 2, -1)
    target = torch.softmax(torch.randn(batch, k + 1, vocab, device=dev, generator=gen) * 2, -1)
    ids = torch.randint(0, vocab, (batch, k), device=dev, generator=gen, dtype=torch.int32)

    print(
        f"flashinfer {backend.version}, {torch.cuda.get_device_name(0)}, torch {torch.__version__}"
    )
    print(f"batch {batch}, vocab {vocab}, median of {iters} calls, ms per call\n")
    rows: list[tuple[str, Callable[[], object], Callable[[], object]]] = [
        (
            "sampling_from_probs",
            lambda: fs.sampling_from_probs(probs, seed=seeds, offset=offsets),
            lambda: backend.sampling_from_probs(probs, seeds, offsets, None),
        ),
        (
            "top_k_top_p (joint)",
            lambda: fs.top_k_top_p_sampling_from_probs(
                probs, top_k, top_p, filter_apply_order="joint", seed=seeds, offset=offsets
            ),
            lambda: backend.top_k_top_p_sampling_from_probs(
                probs, top_k, top_p, seeds, offsets, None, return_draws=False
            ),
        ),
        (
            "chain_speculative (K=3)",
            lambda: fs.chain_speculative_sampling(draft, ids, target, seed=seeds, offset=offsets),
            lambda: backend.chain_speculative_sampling(draft, ids, target, seeds, offsets, None),
        ),
    ]
    print(
        f"{'kernel':<24} {'raw':>7} {'backend':>7} {'ratio':>5} {'loop':>7} {'tapped':>6} "
        f"{'copy':>5} {'+rows':>5} {'b.tap':>5} {'b.copy':>6}"
    )
    timed = []
    for name, raw, through_backend in rows:
        t_raw = per_call_ms(raw, iters)
        t_backend = per_call_ms(through_backend, iters)
        # ``raw`` looks the function up on the module at call time: the tap's wrapper runs.
        # The tap records on the device and copies when ``calls`` is read, so both sides are
        # timed as a loop of ``iters`` calls, the tapped one including that read.
        t_loop = loop_ms(raw, iters, lambda: None)
        with FlashinferTap(fs) as tap:
            t_tapped = loop_ms(raw, iters, lambda: len(tap.calls[-1].rows))
        with FlashinferTap(fs) as tap:
            t_copy = loop_ms(raw, iters, lambda: len(tap.calls))
        with FlashinferTap(fs) as tap:
            t_rows = loop_ms(raw, iters, lambda: read_all(tap))
        t_base = t_base_copy = float("nan")
        if base_tap is not None:
            with base_tap(fs) as old:
                t_base = loop_ms(raw, iters, lambda: len(old.calls[-1].rows))
            with base_tap(fs) as old:
                t_base_copy = loop_ms(raw, iters, lambda: len(old.calls))
        print(
            f"{name:<24} {t_raw:7.3f} {t_backend:7.3f} {t_backend / t_raw:5.2f} "
            f"{t_loop:7.3f} {t_tapped / t_loop:6.2f} {t_copy / t_loop:5.2f} "
            f"{t_rows / t_loop:5.2f} {t_base / t_loop:5.2f} {t_base_copy / t_loop:6.2f}"
        )
        timed.append((name, raw, t_loop))
    if breakdown:
        taps = [("new", FlashinferTap)] + ([("base", base_tap)] if base_tap is not None else [])
        print(f"\nwhere a tapped loop's time goes ({iters} calls, median of 5 loops)")
        for name, raw, t_loop in timed:
            host = host_us(raw, iters)
            parts = [f"raw host {host:5.1f} us/call"]
            for label, tap_class in taps:
                tap_host, read, last_rows = tapped_parts(tap_class, fs, raw, iters)
                parts.append(
                    f"{label}: host {tap_host:5.1f} us/call, read {read:6.3f} ms, "
                    f"rows {last_rows:6.3f} ms"
                )
            copies = loop_ms(functools.partial(two_copies, raw, seeds, offsets), iters, none)
            parts.append(f"2 copies {copies / t_loop:4.2f}")
            print(f"{name:<24} " + "; ".join(parts))

    zeros = torch.zeros(batch, dtype=torch.int64)
    seeds_cpu, offsets_cpu = seeds.cpu(), offsets.cpu()
    t_ideal = wall_ms(
        lambda: backend.sampling_from_probs(probs, seeds_cpu, offsets_cpu, zeros),
        max(3, iters // 10),
    )
    t_one = wall_ms(lambda: backend.sampling_from_probs(probs, seeds_cpu, offsets_cpu, None), iters)
    print(
        f"\nideal contract (subsequence 0: {batch} launches of one row), sampling_from_probs: "
        f"{t_ideal:.1f} ms per call against {t_one:.3f} ms for one launch "
        f"(wall, seeds on the CPU as the engine passes them; ratio {t_ideal / t_one:.0f})"
    )


def engine(tokens: int) -> None:
    from specseed.engine_adapters.base import EngineSettings, RequestPlan, RunPlan
    from specseed.engine_adapters.reference.adapter import ReferenceEngine
    from specseed.engine_adapters.reference.options import ReferenceOptions
    from specseed.models import checkpoint
    from specseed.models.config import LlamaConfig
    from specseed.models.target import expected_shapes
    from specseed.traces.records import TraceRecorder

    config = LlamaConfig(
        vocab_size=32000,
        hidden_size=1024,
        intermediate_size=2816,
        num_hidden_layers=16,
        num_attention_heads=16,
        num_key_value_heads=8,
        max_position_embeddings=512,
        rms_norm_eps=1e-6,
        rope_theta=10000.0,
        bos_token_id=1,
        eos_token_id=2,
    )
    started = time.perf_counter()
    # Gaussian weights drawn on the GPU: the built-in seeded init (hash-based, on the CPU) would
    # take about a minute at this size, and tokens/s does not depend on which random weights.
    gen = torch.Generator(device="cuda").manual_seed(0)
    tensors = {}
    for name, shape in expected_shapes(config).items():
        if name.endswith("layernorm.weight") or name == "model.norm.weight":
            tensors[name] = torch.ones(shape, dtype=torch.bfloat16)
        else:
            std = 0.02 if name == "model.embed_tokens.weight" else shape[-1] ** -0.5
            w = torch.randn(shape, device="cuda", generator=gen) * std
            tensors[name] = w.to(torch.bfloat16).cpu()
    params = sum(t.numel() for t in tensors.values())
    directory = Path(tempfile.mkdtemp(prefix="specseed-bench-"))
    checkpoint.save_checkpoint(
        directory, dataclasses.replace(config, torch_dtype="bfloat16").to_dict(), tensors
    )
    del tensors
    print(
        f"\nreference engine on CUDA: {params / 1e6:.0f}M-parameter Llama, bf16 checkpoint "
        f"(built and written in {time.perf_counter() - started:.0f} s), 16 requests x "
        f"{tokens} tokens, temperature 0.8"
    )
    requests = tuple(
        RequestPlan(
            f"r{i}",
            tuple((7 * i + j) % 30000 + 3 for j in range(16)),
            seed=100 + i,
            temperature=0.8,
            top_k=0,
            top_p=1.0,
            max_tokens=tokens,
        )
        for i in range(16)
    )
    print(f"{'sampling':<12} {'K':>2} {'tokens/s':>9} {'tok/iter':>9} {'seconds':>8}")
    for backend in ("cpu", "flashinfer"):
        settings = EngineSettings(
            device="cuda",
            checkpoint=directory,
            max_num_requests=16,
            options=ReferenceOptions(sampling_backend=backend),  # type: ignore[arg-type]
        )
        eng = ReferenceEngine(settings)
        for k in (3, 0):
            plan = RunPlan("bench", "bench", replace(settings, max_draft_len=k), requests)
            eng.run(plan, TraceRecorder())  # warm-up (JIT, allocator)
            torch.cuda.synchronize()
            start = time.perf_counter()
            trace = eng.run(plan, TraceRecorder())
            torch.cuda.synchronize()
            elapsed = time.perf_counter() - start
            emitted = sum(len(t) for t in trace.end.outputs.values())
            rows = [r for s in trace.steps for r in s.rows if not r.discarded and r.emitted]
            print(
                f"{backend:<12} {k:>2} {emitted / elapsed:9.1f} {emitted / len(rows):9.2f} "
                f"{elapsed:8.2f}"
            )
        del eng
        torch.cuda.empty_cache()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=1024)
    parser.add_argument("--vocab", type=int, default=128256)
    parser.add_argument("--iters", type=int, default=50)
    parser.add_argument("--engine", action="store_true", help="also time the reference engine")
    parser.add_argument("--engine-tokens", type=int, default=64)
    parser.add_argument("--skip-kernels", action="store_true")
    parser.add_argument("--baseline-tap", help="another flashinfer_tap.py, timed side by side")
    parser.add_argument("--breakdown", action="store_true", help="where the tap's time goes")
    add_write_docs(parser)
    args = parser.parse_args()
    if not args.skip_kernels:
        kernels(args.batch, args.vocab, args.iters, args.baseline_tap, args.breakdown)
    if args.engine:
        engine(args.engine_tokens)


if __name__ == "__main__":
    with docs_section(__file__):
        main()
