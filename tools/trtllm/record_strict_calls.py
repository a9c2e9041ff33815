"""Record flashinfer tap data for the TensorRT-LLM conversion tests (tests/data/taps/).

NOT a recording of TensorRT-LLM: TensorRT-LLM cannot be installed on these machines. This
driver issues the ``flashinfer.sampling.sampling_from_probs`` calls that TensorRT-LLM's
strict one-model speculative path issues (one call per non-greedy forward pass over all
logits rows: 1 row for a context request, K + 1 for a generation request, each row carrying
its request's seed and offset), with the offsets laid out as the upstream source lays them
out (written out here by hand, independently of specseed's contracts.py):

- ``slot-span``: tensorrt_llm/_torch/speculative/interface.py after the slot-span change (the
  layout test_rng_window_counter.py pins): window (2K + 2) * SPAN per forward pass, counted
  per request for seeded requests; target row j at base + j * SPAN.
- ``pr17599``: the same file at commit 2c0eca97d3 (PR #17599): window K + 1, every logits row
  of a request at base + 0 (``flat_offsets.extend(offset for _ in range(num_tokens))``).

The calls go through the real ``specseed.taps.flashinfer_tap.FlashinferTap`` wrapped around
a stand-in ``flashinfer.sampling`` made of specseed's CPU twins of flashinfer's kernels, with
flashinfer 0.7.4's per-row seeds or 0.6.4's element-0 reading, or (``--real``, on a GPU)
around the installed ``flashinfer.sampling`` itself. Run from the repository root:

    PYTHONPATH=src python tools/trtllm/record_strict_calls.py            # CPU twins
    PYTHONPATH=src python tools/trtllm/record_strict_calls.py --real OUT # real kernels
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from specseed import sampling
from specseed.engine_adapters.trtllm.observe import calls_to_json
from specseed.taps.flashinfer_tap import FlashinferTap

K = 2
SPAN = 32  # _RNG_SLOT_SPAN in tensorrt_llm/_torch/speculative/interface.py at 8de196e3
VOCAB = 32
# (request id, seed, iterations, first call it appears in); all sampled at temperature 1
REQUESTS = [("a", 7, 3, 0), ("b", 11, 4, 0), ("c", (1 << 63) + 5, 3, 1)]
OUT = Path("tests/data/taps")


def standin(version: str) -> ModuleType:
    package = ModuleType("recorded_flashinfer")
    package.__version__ = version  # type: ignore[attr-defined]
    module = ModuleType("recorded_flashinfer.sampling")
    mode = "element0" if version == "0.6.4" else "per_row"

    def sampling_from_probs(
        probs: torch.Tensor,
        indices: torch.Tensor | None = None,
        deterministic: bool = True,
        generator: torch.Generator | None = None,
        check_nan: bool = False,
        seed: Any = None,
        offset: Any = None,
    ) -> Any:
        return sampling.sampling_from_probs(
            probs,
            indices,
            deterministic,
            generator,
            check_nan,
            seed,
            offset,
            seed_offset_indexing=mode,
        )

    module.sampling_from_probs = sampling_from_probs  # type: ignore[attr-defined]
    package.sampling = module  # type: ignore[attr-defined]
    sys.modules[package.__name__] = package
    sys.modules[module.__name__] = module
    return module


def offsets_for(layout: str, n: int, rows: int) -> list[int]:
    if layout == "slot-span":
        window = (2 * K + 2) * SPAN
        return [n * window + j * SPAN for j in range(rows)]
    return [n * (K + 1)] * rows


def record(
    layout: str, version: str, module: ModuleType | None = None, device: str = "cpu"
) -> dict[str, object]:
    kernels = "CPU twins of flashinfer" if module is None else "real flashinfer kernels, on CUDA"
    module = module if module is not None else standin(version)
    generator = torch.Generator().manual_seed(0)
    iterations = {rid: 0 for rid, *_ in REQUESTS}
    tap = FlashinferTap(module=module, version=version).install()
    try:
        for call in range(6):
            seeds: list[int] = []
            offsets: list[int] = []
            for rid, seed, total, first in REQUESTS:
                n = iterations[rid]
                if call < first or n >= total:
                    continue
                rows = 1 if n == 0 else K + 1  # context row, or K + 1 target rows
                seeds += [seed - (1 << 64) if seed >= 1 << 63 else seed] * rows  # int64 bits
                offsets += offsets_for(layout, n, rows)
                iterations[rid] = n + 1
            if not seeds:
                break
            logits = torch.randn(len(seeds), VOCAB, generator=generator)
            module.sampling_from_probs(  # type: ignore[attr-defined]
                torch.softmax(logits, dim=-1).to(device),
                seed=torch.tensor(seeds, dtype=torch.int64, device=device),
                offset=torch.tensor(offsets, dtype=torch.int64, device=device),
            )
    finally:
        tap.uninstall()
    return {
        "description": (
            "flashinfer tap recording of the calls TensorRT-LLM's strict one-model path makes "
            f"({layout} layout, K = {K}), issued by tools/trtllm/record_strict_calls.py over "
            f"{kernels} {version}; not recorded from TensorRT-LLM"
        ),
        "layout": layout,
        "flashinfer": version,
        "max_draft_len": K,
        "requests": [{"id": r, "seed": s, "iterations": t} for r, s, t, _ in REQUESTS],
        "calls": calls_to_json(tap.calls),
    }


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--real":
        import flashinfer  # the installed release, on a CUDA machine
        import flashinfer.sampling as fs

        out, version = Path(sys.argv[2]), str(flashinfer.__version__)
        runs = [(layout, version, fs, "-real") for layout in ("slot-span", "pr17599")]
    else:
        out = OUT
        runs = [
            (layout, version, None, "")
            for layout, version in (
                ("slot-span", "0.7.4"),
                ("slot-span", "0.6.4"),
                ("pr17599", "0.7.4"),
            )
        ]
    out.mkdir(parents=True, exist_ok=True)
    for layout, version, module, suffix in runs:
        device = "cpu" if module is None else "cuda"
        data = record(layout, version, module, device)
        path = out / f"trtllm-strict-{layout}-fi{version.replace('.', '')}{suffix}.json"
        path.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
        print(path)


if __name__ == "__main__":
    main()
