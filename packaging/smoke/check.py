"""Holds what each installed artifact answered to the scenario, and holds the
artifacts to each other: they run one component, so they answer alike.

    python3 check.py COMPONENT_SHA256 VERSION ANSWERS...

Each ANSWERS file is the component sha256 the package reports, then the
kernel's answer to each scenario step, one per line, as the host returned it.
"""

import json
import sys
from pathlib import Path

STEPS = [step["command"] for step in json.loads((Path(__file__).parent / "scenario.json").read_text())["steps"]]


def check(path: Path, sha256: str, version: str) -> list[str]:
    lines = path.read_text().splitlines()
    if len(lines) != 1 + len(STEPS):
        return [f"{len(lines) - 1} answers for {len(STEPS)} steps"]
    wrong = [] if lines[0] == sha256 else [f"reports component sha256 {lines[0]}, the build made {sha256}"]
    answers = dict(zip(STEPS, map(json.loads, lines[1:])))
    info, plan, compaction, recall = answers["info"], answers["plan-context"], answers["compact-context"], answers["recall-memory"]
    if info["kernel"] != {"name": "ctxkernel", "version": version}:
        wrong.append(f"info names the kernel {info['kernel']}, expected ctxkernel {version}")
    if answers["append-events"]["head"]["seq"] != 81:
        wrong.append("append-events did not append the 81 events")
    kept = {entry["itemId"]: entry["keep"] for entry in plan["context"]}
    if kept.get("s1-0001") != "pinned" or not plan["dropped"] or "s1-0081" not in kept:
        wrong.append("the plan does not keep the pinned goal and the latest turn while dropping older turns")
    if compaction["status"] != "committed" or compaction["compaction"]["metrics"]["strategy"] != "local" or compaction["compaction"]["degraded"]:
        wrong.append(f"the compaction is {compaction['status']}, not a committed local compaction")
    if answers["decide-memory"]["memory"]["state"] != "active":
        wrong.append("the memory was not activated")
    if [m["content"] for m in recall["memories"][:1]] != ["releases go out on Tuesdays after the staging check"]:
        wrong.append("recall does not find the remembered fact first")
    return wrong


def main() -> int:
    sha256, version, *paths = sys.argv[1:]
    failed = False
    for path in map(Path, paths):
        try:
            wrong = check(path, sha256, version)
        except (KeyError, TypeError, ValueError, IndexError) as e:
            wrong = [f"an answer is not what the kernel answers: {e!r}"]
        for line in wrong:
            print(f"{path.stem}: {line}", file=sys.stderr)
        failed |= bool(wrong)
    first = Path(paths[0]).read_text()
    for path in paths[1:]:
        if Path(path).read_text() != first:
            print(f"{Path(path).stem} answered otherwise than {Path(paths[0]).stem}", file=sys.stderr)
            failed = True
    if not failed:
        print(f"  {', '.join(Path(p).stem for p in paths)}: installed outside the checkout, each planned, compacted and recalled alike (component {sha256[:12]}…)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
