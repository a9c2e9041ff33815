"""Record curand's own Philox4x32-10 output for the states of ``cases.curand_cases`` (GPU).

Usage: python tools/groundtruth/record_curand.py --oracle ./curand_oracle --out FILE

Feeds the states to the compiled ``curand_oracle.cu`` and writes a JSON file with the cases'
digest, the environment and, per state, the curand() words and curand_uniform() bit patterns.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cases import curand_cases, digest


def _tool_output(command: list[str]) -> str:
    try:
        return subprocess.run(command, capture_output=True, text=True).stdout.strip()
    except OSError:
        return ""


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--oracle", required=True)
    parser.add_argument("--out", required=True)
    opts = parser.parse_args()

    states = curand_cases()
    lines = "".join(
        f"{s['seed']} {s['subsequence']} {s['offset']} {s['n']} {s['skip']} {s['skip_times']}\n"
        for s in states
    )
    run = subprocess.run([opts.oracle], input=lines, capture_output=True, text=True, check=True)
    results = []
    for line in run.stdout.splitlines():
        index, words, uniforms = line.split(" ")
        assert int(index) == len(results)
        results.append({"words": words[2:].split(","), "uniform_bits": uniforms[2:].split(",")})
    assert len(results) == len(states), (len(results), len(states))
    nvcc = _tool_output(["nvcc", "--version"])
    smi = _tool_output(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"])
    record = {
        "meta": {"nvcc": nvcc.strip().splitlines()[-1] if nvcc else "?", "gpu": smi},
        "cases_digest": digest(states),
        "results": results,
    }
    Path(opts.out).write_text(json.dumps(record, separators=(",", ":")))
    print(f"{len(results)} states recorded; {record['meta']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
