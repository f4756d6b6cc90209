#!/usr/bin/env python3
"""Compares parity runs: every host's transcript and store dump must equal the
first host's byte for byte, and the first host's must equal the checked-in
golden files; every host reading another host's store files must see the same.
On a divergence it names the fixture, the first differing step (or store key)
and the JSON path that differs, and exits 1.

Usage: compare.py --runs build/parity --hosts rust,node,python,jvm [--bless] [--only PATTERN,...]
  --bless  rewrite tests/parity/golden from the first host's run
  --only   compare (and bless) only the fixtures whose names match these shell patterns
"""
import argparse
import fnmatch
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def first_difference(a, b, path=""):
    """The JSON path of the first difference between two values, with both sides."""
    if type(a) is not type(b):
        return path or "/", a, b
    if isinstance(a, dict):
        for key in sorted(set(a) | set(b)):
            if key not in a or key not in b:
                return f"{path}/{key}", a.get(key, "<absent>"), b.get(key, "<absent>")
            found = first_difference(a[key], b[key], f"{path}/{key}")
            if found:
                return found
        return None
    if isinstance(a, list):
        for i, (x, y) in enumerate(zip(a, b)):
            found = first_difference(x, y, f"{path}/{i}")
            if found:
                return found
        if len(a) != len(b):
            return f"{path} (length)", len(a), len(b)
        return None
    return None if a == b else (path or "/", a, b)


def clip(value):
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 120 else text[:117] + "..."


def compare_lines(kind, fixture, ours, theirs, us, them):
    """None when equal, else a report naming the first differing line."""
    if ours == theirs:
        return None
    a_lines, b_lines = ours.splitlines(), theirs.splitlines()
    for n, (a, b) in enumerate(zip(a_lines, b_lines)):
        if a != b:
            try:
                a_value, b_value = json.loads(a), json.loads(b)
            except json.JSONDecodeError:
                return f"{fixture}: {kind} line {n + 1} differs ({us} vs {them}); not JSON"
            where = a_value.get("step", a_value.get("key", n))
            found = first_difference(a_value, b_value)
            if found is None:
                return f"{fixture}: {kind} line {n + 1} (step {where}) differs in bytes only (key order or number format)"
            path, x, y = found
            label = "step" if "step" in a_value else "store key"
            return f"{fixture}: {kind} differs at {label} {where}, path {path}: {us}={clip(x)} {them}={clip(y)}"
    return f"{fixture}: {kind} has {len(a_lines)} lines in {us} but {len(b_lines)} in {them}"


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", required=True)
    parser.add_argument("--hosts", required=True)
    parser.add_argument("--bless", action="store_true")
    parser.add_argument("--only", default="*")
    args = parser.parse_args()
    hosts = args.hosts.split(",")
    golden = os.path.join(HERE, "golden")
    patterns = args.only.split(",")
    fixtures = sorted(f[:-5] for f in os.listdir(os.path.join(HERE, "fixtures"))
                      if f.endswith(".json") and any(fnmatch.fnmatch(f[:-5], p) for p in patterns))
    problems = []
    for fixture in fixtures:
        first = hosts[0]
        for kind in ("transcript", "dump"):
            name = f"{fixture}.{kind}.jsonl"
            reference = read(os.path.join(args.runs, first, name))
            for host in hosts[1:]:
                report = compare_lines(kind, fixture, reference, read(os.path.join(args.runs, host, name)), first, host)
                if report:
                    problems.append(report)
            if args.bless:
                os.makedirs(golden, exist_ok=True)
                with open(os.path.join(golden, name), "w", encoding="utf-8") as f:
                    f.write(reference)
            else:
                expected = os.path.join(golden, name)
                if not os.path.exists(expected):
                    problems.append(f"{fixture}: no golden {kind} (run `make parity-bless` and review the diff)")
                else:
                    report = compare_lines(kind, fixture, read(expected), reference, "golden", first)
                    if report:
                        problems.append(report)
        # Each host read the store file the previous host wrote.
        for i, host in enumerate(hosts):
            writer = hosts[i - 1]
            seen = read(os.path.join(args.runs, host, f"{fixture}.read.jsonl"))
            dump = seen.split("\n", 1)[1]
            report = compare_lines("store read back", fixture, read(os.path.join(args.runs, writer, f"{fixture}.dump.jsonl")), dump, writer, host)
            if report:
                problems.append(report)
            if i and seen.split("\n", 1)[0] != read(os.path.join(args.runs, hosts[0], f"{fixture}.read.jsonl")).split("\n", 1)[0]:
                problems.append(f"{fixture}: `info` on a store read back differs between {hosts[0]} and {host}")
    for problem in problems:
        print(f"DIVERGENCE {problem}")
    verdict = "blessed" if args.bless and not problems else ("FAILED" if problems else "identical")
    print(f"parity: {len(fixtures)} fixtures × {len(hosts)} hosts ({', '.join(hosts)}): {verdict}")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
