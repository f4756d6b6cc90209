"""Times one kernel command on this host, for the cross-host table in
docs/BENCHMARKS.md: a fresh in-memory kernel, warm-up calls (a fifth of the
iterations, at least three), then
ITERATIONS timed calls of COMMAND with the request in FILE.
Prints {"p50Ms": ..., "p95Ms": ...}.

With `cold`, the cold start instead: a new kernel answers `info` (the
request in INFO), then `plan-context` (PLAN), and the name of each command is
printed as soon as it is answered, for the caller to time from the process
start.

Usage: python -m ctxkernel_sdk.bench COMMAND FILE ITERATIONS
       python -m ctxkernel_sdk.bench cold INFO PLAN
"""

import json
import math
import sys
import time

from . import Kernel, MemoryStore


def cold(info: str, plan: str) -> None:
    kernel = Kernel(MemoryStore())
    for command, path in (("info", info), ("plan-context", plan)):
        with open(path, encoding="utf-8") as f:
            kernel.call(command, f.read())
        print(command, flush=True)


def main() -> None:
    if sys.argv[1] == "cold":
        return cold(sys.argv[2], sys.argv[3])
    command, path, iterations = sys.argv[1], sys.argv[2], int(sys.argv[3])
    with open(path, encoding="utf-8") as f:
        request = f.read()
    kernel = Kernel(MemoryStore())
    for _ in range(max(3, iterations // 5)):
        kernel.call(command, request)
    times = []
    for _ in range(iterations):
        start = time.perf_counter_ns()
        kernel.call(command, request)
        times.append((time.perf_counter_ns() - start) / 1e6)
    times.sort()
    def at(q: float) -> float:
        return times[min(len(times), max(1, math.ceil(len(times) * q))) - 1]

    print(json.dumps({"p50Ms": at(0.5), "p95Ms": at(0.95)}))


if __name__ == "__main__":
    main()
