"""Where the read of a flashinfer tap's ``calls`` spends its time on a GPU machine (GPU only).

    python tools/gpu/probe_d2h.py

Times (median of 20, synchronised) a 1 MiB device-to-host copy, about what 50 calls of
``sampling_from_probs`` at batch 1024 record: into fresh host memory that is kept (as the tap
keeps it), into host memory that is reused, into one pinned buffer, into a new pinned buffer
that is kept; and the concatenation of 50 calls' copies (100 parts) on the device.
"""

import statistics
import time

import torch

n = 1 << 20
dev = torch.randint(0, 255, (n,), dtype=torch.uint8, device="cuda")
kept = []


def ms(fn, reps=20):
    fn()
    xs = []
    for _ in range(reps):
        torch.cuda.synchronize()
        s = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        xs.append((time.perf_counter() - s) * 1e3)
    return f"{statistics.median(xs):.3f}"


print("1 MiB device to host, ms, median of 20")
print("  .cpu(), result kept (fresh host memory each time):", ms(lambda: kept.append(dev.cpu())))
print("  .cpu(), result dropped (host memory reused):      ", ms(lambda: dev.cpu()))
host = torch.zeros(n, dtype=torch.uint8)
print("  copy_ into one touched pageable buffer:           ", ms(lambda: host.copy_(dev)))
pinned = torch.empty(n, dtype=torch.uint8, pin_memory=True)
print("  copy_ into one pinned buffer:                     ", ms(lambda: pinned.copy_(dev)))
print(
    "  new pinned buffer + copy_, kept:                  ",
    ms(lambda: kept.append(torch.empty(n, dtype=torch.uint8, pin_memory=True).copy_(dev))),
)
parts = [
    torch.empty(16384 if i % 2 == 0 else 4096, dtype=torch.uint8, device="cuda") for i in range(100)
]
print("  torch.cat of 100 parts (50 calls), one launch:    ", ms(lambda: torch.cat(parts)))
