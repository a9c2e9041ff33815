"""Whether two bundles of the same audit recorded the same runs, timings aside.

    python benchmarks/compare_bundle_streams.py BEFORE_BUNDLE AFTER_BUNDLE

A speed change to the reference engine must not change a single token, logit fingerprint or
RNG event: this compares every trace file (``*/*.jsonl``) of two bundles record by record,
with the wall-clock fields (``seconds``) removed, and prints the first difference of each
file that differs. Exit 0 when every trace matches, 1 otherwise.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

TIMING_KEYS = frozenset({"seconds"})


def _strip(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if k not in TIMING_KEYS}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def _records(path: Path) -> list[Any]:
    return [_strip(json.loads(line)) for line in path.read_text().splitlines() if line.strip()]


def main() -> int:
    before, after = (Path(a) for a in sys.argv[1:3])
    names = sorted({p.relative_to(before) for p in before.glob("*/*.jsonl")})
    other = sorted({p.relative_to(after) for p in after.glob("*/*.jsonl")})
    if names != other:
        print(f"different trace files: {sorted(set(names) ^ set(other))}")
        return 1
    differing = 0
    records = 0
    for name in names:
        left, right = _records(before / name), _records(after / name)
        records += len(left)
        if left == right:
            continue
        differing += 1
        index = next(
            (i for i, (a, b) in enumerate(zip(left, right, strict=False)) if a != b),
            min(len(left), len(right)),
        )
        print(f"{name}: record {index} differs ({len(left)} against {len(right)} records)")
    print(f"{len(names)} trace files, {records} records: {differing} differ (timings ignored)")
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())
