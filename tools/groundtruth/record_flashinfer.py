"""Record flashinfer's CUDA sampling kernels on the cases of ``cases.py`` (run on a GPU).

Usage: python tools/groundtruth/record_flashinfer.py --out FILE [--label 0.7.4]

Imports whatever ``flashinfer`` is on the path, runs every case twice on ``cuda`` (to record
whether the kernel is run-to-run deterministic), and writes a small JSON file: the cases'
digest, the environment, and per case the flattened outputs (or the error it raised). Inputs
are not stored; ``cases.py`` rebuilds them and the digest proves they are the same.
"""

from __future__ import annotations

import argparse
import inspect
import json
import platform
import sys
import time
import traceback
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cases import digest, flashinfer_cases
from materialize import flatten_outputs, materialize_args


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--label", default="")
    parser.add_argument("--device", default="cuda", help="cpu only for a dry run of the harness")
    parser.add_argument(
        "--skip", action="append", default=[], help="case id to leave out (repeatable)"
    )
    opts = parser.parse_args()

    started = time.time()
    import flashinfer
    import flashinfer.sampling as fs

    cases = flashinfer_cases()
    results: dict[str, dict[str, object]] = {}
    meta = {
        "label": opts.label,
        "flashinfer": getattr(flashinfer, "__version__", "?"),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "device": torch.cuda.get_device_name(0) if opts.device == "cuda" else opts.device,
        "capability": list(torch.cuda.get_device_capability(0)) if opts.device == "cuda" else [],
        "python": platform.python_version(),
        "skipped": opts.skip,
    }
    for case in cases:
        if case["id"] in opts.skip:
            continue
        fn = getattr(fs, case["kernel"])
        accepted = inspect.signature(fn).parameters
        args = {k: v for k, v in case["args"].items() if k in accepted}
        dropped = sorted(set(case["args"]) - set(args))
        entry: dict[str, object] = {"dropped_args": dropped}
        try:
            try:
                first = flatten_outputs(fn(**materialize_args(args, opts.device)))
            except TypeError:
                # Older releases lack return_valid; signatures hidden by decorators hide that.
                if "return_valid" not in args:
                    raise
                args.pop("return_valid")
                entry["dropped_args"] = [*dropped, "return_valid"]
                first = flatten_outputs(fn(**materialize_args(args, opts.device)))
            second = flatten_outputs(fn(**materialize_args(args, opts.device)))
            entry["outputs"] = first
            entry["repeat_identical"] = first == second
        except Exception as exc:  # recorded, so the CPU side can say what the GPU refused
            entry["error"] = f"{type(exc).__name__}: {exc}"
            entry["traceback"] = traceback.format_exc()[-2000:]
        results[case["id"]] = entry
        print(case["id"], "error" if "error" in entry else "ok", flush=True)
        # Written after every case: a kernel that hangs must not take the earlier ones with it.
        meta["seconds"] = round(time.time() - started, 1)
        record = {"meta": meta, "cases_digest": digest(cases), "results": results}
        Path(opts.out).write_text(json.dumps(record, separators=(",", ":")))
    print(json.dumps(meta))
    return 0


if __name__ == "__main__":
    sys.exit(main())
