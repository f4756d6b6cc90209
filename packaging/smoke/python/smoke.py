"""The scenario through the installed wheel: `python smoke.py SCENARIO OUT STORE`."""

import json
import sys

from ctxkernel_sdk import COMPONENT_SHA256, Kernel, SqliteStore

scenario, out, store = sys.argv[1:4]
kernel = Kernel(SqliteStore(store))
assert kernel.component_sha256 == COMPONENT_SHA256, (kernel.component_sha256, COMPONENT_SHA256)
lines, previous = [COMPONENT_SHA256], ""
for step in json.load(open(scenario))["steps"]:
    request = step["request"]
    if step["command"] == "decide-memory":
        request = {**request, "memoryId": json.loads(previous)["receipts"][0]["memory"]["memoryId"]}
    previous = kernel.call(step["command"], json.dumps(request))
    lines.append(previous)
open(out, "w").write("\n".join(lines) + "\n")
