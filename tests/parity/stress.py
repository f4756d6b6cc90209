#!/usr/bin/env python3
"""Runs one host's parity runner over every fixture while other processes keep
every core busy, several times, and holds each run to the golden files.

A host whose answer depends on timing (a JIT compiling a method while a long
loop runs in it, a background thread) answers the same as every other host
when idle and differently under load; this is where that shows.

Usage: stress.py --runs DIR --reps N --host NAME -- COMMAND...
  COMMAND is the host's runner; `{out}` in it becomes the directory of one repetition.
"""
import argparse
import glob
import os
import subprocess
import sys
import time

from compare import HERE, compare_lines, read

# Spins one core until killed.
SPIN = "while True: pass"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", required=True)
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--host", required=True)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = [part for part in args.command if part != "--"]
    fixtures = sorted(os.path.basename(f)[:-5] for f in glob.glob(os.path.join(HERE, "fixtures", "*.json")))
    problems = []
    load = [subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(os.cpu_count() or 2)]
    try:
        for rep in range(1, args.reps + 1):
            out = os.path.join(args.runs, f"{args.host}-{rep}")
            started = time.monotonic()
            subprocess.run([part.replace("{out}", out) for part in command], check=True, stdout=subprocess.DEVNULL)
            print(f"parity under load: {args.host} run {rep} of {args.reps} took {time.monotonic() - started:.0f} s", flush=True)
            for fixture in fixtures:
                for kind in ("transcript", "dump"):
                    name = f"{fixture}.{kind}.jsonl"
                    report = compare_lines(kind, fixture, read(os.path.join(HERE, "golden", name)), read(os.path.join(out, name)),
                                           "golden", f"{args.host} under load, run {rep}")
                    if report:
                        problems.append(report)
    finally:
        for spinner in load:
            spinner.kill()
            spinner.wait()
    for problem in problems:
        print(f"DIVERGENCE {problem}")
    verdict = "FAILED" if problems else "identical to the goldens"
    print(f"parity under load: {len(fixtures)} fixtures × {args.reps} runs on {args.host}: {verdict}")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
