"""Times one kernel command on this host, for the cross-host table in
docs/BENCHMARKS.md: a fresh in-memory kernel, warm-up calls (a fifth of the
iterations, at least three), then
ITERATIONS timed calls of COMMAND with the request in FILE.
Prints {"p50Ms": ..., "p95Ms": ...}.

Usage: python -m ctxkernel_sdk.bench COMMAND FILE ITERATIONS
"""

import json
import math
import sys
import time

from . import Kernel, MemoryStore


def main() -> None:
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
    at = lambda q: times[min(len(times), max(1, math.ceil(len(times) * q))) - 1]  # noqa: E731
    print(json.dumps({"p50Ms": at(0.5), "p95Ms": at(0.95)}))


if __name__ == "__main__":
    main()
