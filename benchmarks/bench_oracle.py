"""The distribution check's oracle: scored tokens per second per model size, and its error.

    python benchmarks/bench_oracle.py [--models tiny,1b,8b] [--requests 64] [--prompt 16]
        [--tokens 32] [--cpu-check 2] [--power-only]

For each model, on CUDA when torch sees a device (else the CPU): ``ReferenceOracle.logits``
over ``--requests`` teacher-forced sequences of ``--prompt`` prompt and ``--tokens`` emitted
tokens (what the distribution check asks of it), timed after a warm-up; "scored tokens/s"
counts emitted tokens whose next-token distribution came back (on the host, float64).

- ``tiny``: the built-in model of the default audit (also timed on the CPU oracle);
- ``1b``: a random Llama of Llama-3.2-1B's shape (vocab 128256, hidden 2048, 16 layers,
  32 heads / 8 KV heads, SwiGLU 8192, tied embeddings), weights drawn on the device;
- ``8b``: a random Llama of Llama-3-8B's shape (vocab 128256, hidden 4096, 32 layers, 32 / 8
  heads, SwiGLU 14336).

No hub: random weights (tokens/s does not depend on which). The oracle computes in float32
(the checkpoint's dtype only changes the load), TF32 off.

With ``--cpu-check N``: the largest deviation of the CUDA oracle's logits from the CPU
float32 forward over N sequences, as a fraction of each row's largest |logit| (the quantity
``CUDA_LOGITS_ERROR`` bounds), and the same with TF32 left on (what turning it off avoids).
``8b`` is checked with one sequence (its CPU forward is slow).

``--power-only`` (any machine): the pooled PIT test's smallest detectable total variation
against the number of scored tokens, at the default level, for the envelope a 128256-token
vocabulary gets on the CPU oracle and on the CUDA one (how many samples a stated power costs).
"""

from __future__ import annotations

import argparse
import contextlib
import math
import time

import torch
from perf_page import add_write_docs, docs_section

from specseed.distribution import analysis, collect, oracle, stats
from specseed.models import numerics
from specseed.models.config import LlamaConfig
from specseed.models.target import LlamaTarget, expected_shapes

SHAPES = {
    "1b": LlamaConfig(
        vocab_size=128256,
        hidden_size=2048,
        intermediate_size=8192,
        num_hidden_layers=16,
        num_attention_heads=32,
        num_key_value_heads=8,
        max_position_embeddings=512,
        tie_word_embeddings=True,
        rope_theta=500000.0,
    ),
    "8b": LlamaConfig(
        vocab_size=128256,
        hidden_size=4096,
        intermediate_size=14336,
        num_hidden_layers=32,
        num_attention_heads=32,
        num_key_value_heads=8,
        max_position_embeddings=512,
        rope_theta=500000.0,
    ),
}


def random_target(config: LlamaConfig, device: str) -> tuple[LlamaTarget, float]:
    """A Llama with Gaussian weights drawn on ``device`` (seconds to build)."""
    started = time.perf_counter()
    gen = torch.Generator(device=device).manual_seed(0)
    tensors = {}
    for name, shape in expected_shapes(config).items():
        if name.endswith("norm.weight"):
            tensors[name] = torch.ones(shape)
        else:
            std = 0.02 if name == "model.embed_tokens.weight" else shape[-1] ** -0.5
            w = torch.randn(shape, device=device, generator=gen) * std
            tensors[name] = w.cpu()
            del w
    target = LlamaTarget(config, tensors, device=device, max_seq_len=config.max_position_embeddings)
    del tensors
    return target, time.perf_counter() - started


def sequences(
    count: int, prompt: int, tokens: int, vocab: int
) -> list[tuple[tuple[int, ...], ...]]:
    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(3, vocab, (count, prompt + tokens), generator=gen).tolist()
    return [(tuple(row[:prompt]), tuple(row[prompt:])) for row in ids]


def timed(orc: oracle.ReferenceOracle, seqs: list) -> float:  # type: ignore[type-arg]
    orc.logits(seqs[:2])  # warm-up (allocator, kernels)
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    start = time.perf_counter()
    orc.logits(seqs)
    return time.perf_counter() - start


def deviation(a: list[torch.Tensor], b: list[torch.Tensor]) -> float:
    """Largest |a - b| over each row's largest |b|."""
    worst = 0.0
    for x, y in zip(a, b, strict=True):
        worst = max(worst, float(((x - y).abs().amax(-1) / y.abs().amax(-1)).max()))
    return worst


def with_tf32(orc: oracle.ReferenceOracle, seqs: list) -> list[torch.Tensor]:  # type: ignore[type-arg]
    """The oracle's logits with TF32 on (the guard replaced for the measurement only)."""
    guard = oracle.true_float32
    previous = torch.get_float32_matmul_precision()
    oracle.true_float32 = contextlib.nullcontext  # type: ignore[assignment]
    torch.set_float32_matmul_precision("high")
    try:
        return orc.logits(seqs)
    finally:
        torch.set_float32_matmul_precision(previous)
        oracle.true_float32 = guard


def bench_models(args: argparse.Namespace) -> None:
    device = oracle.oracle_device()
    name = torch.cuda.get_device_name(0) if device == "cuda" else "CPU"
    print(f"oracle on {device} ({name}), torch {torch.__version__}")
    print(
        f"{args.requests} requests x ({args.prompt} prompt + {args.tokens} scored tokens), "
        "tokens/s = scored tokens per second\n"
    )
    header = (
        f"{'model':<6} {'params':>7} {'device':>6} {'build s':>7} {'seconds':>8} "
        f"{'tokens/s':>9} {'GiB':>6} {'dev/max':>9} {'tf32 dev':>9}"
    )
    print(header)
    for model in args.models.split(","):
        requests = args.requests
        if model == "tiny":
            started = time.perf_counter()
            orc = oracle.ReferenceOracle(None, 0, device=device)
            build = time.perf_counter() - started
            config = orc._target.config
            requests = max(requests, 256)
        else:
            config = SHAPES[model]
            target, build = random_target(config, device)
            orc = oracle.ReferenceOracle.of_target(target, f"random {model}")
        params = sum(t.numel() for t in orc._target.state_dict().values())
        seqs = sequences(requests, args.prompt, args.tokens, config.vocab_size)
        if device == "cuda":
            torch.cuda.reset_peak_memory_stats()
        seconds = timed(orc, seqs)
        gib = torch.cuda.max_memory_allocated() / 2**30 if device == "cuda" else float("nan")
        dev = tf32 = float("nan")
        checked = min(args.cpu_check, 1 if model == "8b" else args.cpu_check)
        if device == "cuda" and checked > 0:
            few = seqs[:checked]
            cpu = oracle.ReferenceOracle.of_target(
                LlamaTarget(
                    config, orc._target.state_dict(), device="cpu", max_seq_len=orc.max_len
                ),
                "cpu copy",
            )
            reference = cpu.logits(few)
            dev = deviation(orc.logits(few), reference)
            tf32 = deviation(with_tf32(orc, few), reference)
            del cpu
        print(
            f"{model:<6} {params / 1e9:6.2f}B {device:>6} {build:7.1f} {seconds:8.2f} "
            f"{requests * args.tokens / seconds:9.0f} {gib:6.1f} {dev:9.2e} {tf32:9.2e}",
            flush=True,
        )
        if model == "tiny" and device == "cuda":
            cpu_orc = oracle.ReferenceOracle(None, 0, device="cpu")
            cpu_seconds = timed(cpu_orc, seqs)
            print(
                f"{'tiny':<6} {params / 1e9:6.2f}B {'cpu':>6} {'':>7} {cpu_seconds:8.2f} "
                f"{requests * args.tokens / cpu_seconds:9.0f}  (CPU oracle, one thread)",
                flush=True,
            )
        del orc
        if device == "cuda":
            torch.cuda.empty_cache()


def power_table() -> None:
    """Smallest detectable TV of the pooled PIT test against scored tokens (vocab 128256)."""
    vocab, temperature, max_logit = 128256, 1.0, 30.0
    tests = 40  # sub-tests in a run (Holm's strictest step is alpha / tests)
    alpha = analysis.DEFAULT_ALPHA / tests
    bins = 20
    print(
        f"\npooled PIT, {bins} bins, level {analysis.DEFAULT_ALPHA:g} / {tests} sub-tests, "
        f"power {analysis.POWER}; vocab {vocab}, T = {temperature}, max |logit| {max_logit:g}"
    )
    envelopes = {}
    for label, error in (("CPU", 0.0), ("CUDA", oracle.CUDA_LOGITS_ERROR)):
        delta = (collect.UNIT_ROUNDOFF["float32"] + error) * max_logit
        log_ratio = 2.0 * delta / temperature + 64 * 2.0**-24
        envelopes[label] = -math.expm1(-log_ratio) + vocab * 2.0**-24
    print("envelope per token: " + ", ".join(f"{k} {v:.4f}" for k, v in envelopes.items()))
    print(f"{'scored tokens':>13} {'exact':>8} {'CPU env':>8} {'CUDA env':>8}")
    for n in (1_000, 10_000, 100_000, 1_000_000, 10_000_000):
        cells = []
        for eps in (0.0, envelopes["CPU"], envelopes["CUDA"]):
            null_nc = 2.0 * n * eps * eps * bins
            nc = stats.noncentrality_for_power(alpha, bins - 1, analysis.POWER, null_nc)
            cells.append(math.sqrt(nc / (4.0 * n)))
        print(f"{n:>13,} " + " ".join(f"{c:8.4f}" for c in cells))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="tiny,1b,8b")
    parser.add_argument("--requests", type=int, default=64)
    parser.add_argument("--prompt", type=int, default=16)
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--cpu-check", type=int, default=2)
    parser.add_argument("--power-only", action="store_true")
    parser.add_argument(
        "--row-block",
        type=int,
        help="rows per matrix product in the forward (default: the engine's ROW_BLOCK, 16)",
    )
    add_write_docs(parser)
    args = parser.parse_args()
    if args.row_block:
        # What-if only: the engine's block keeps its rows batch-invariant; the oracle needs
        # float32 accuracy, not those bits, so a larger block is a lead for a faster oracle.
        numerics.ROW_BLOCK = args.row_block
        print(f"row block {args.row_block} (engine: 16)")
    if not args.power_only:
        bench_models(args)
    power_table()


if __name__ == "__main__":
    with docs_section(__file__):
        main()
