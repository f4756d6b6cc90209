"""The scenario through the released `ctxk` binary: `python3 smoke.py CTXK SCENARIO OUT STORE`."""

import json
import re
import subprocess
import sys

ctxk, scenario, out, store = sys.argv[1:5]
version = subprocess.run([ctxk, "--version"], capture_output=True, text=True, check=True).stdout
lines, previous = [re.fullmatch(r"ctxk \S+ \(component sha256 ([0-9a-f]{64})\)\n", version).group(1)], ""
for step in json.load(open(scenario))["steps"]:
    request = step["request"]
    if step["command"] == "decide-memory":
        request = {**request, "memoryId": json.loads(previous)["receipts"][0]["memory"]["memoryId"]}
    done = subprocess.run([ctxk, "--store", store, "call", step["command"]], input=json.dumps(request), capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"ctxk call {step['command']}: {done.stderr}")
    previous = done.stdout.rstrip("\n")
    lines.append(previous)
open(out, "w").write("\n".join(lines) + "\n")
