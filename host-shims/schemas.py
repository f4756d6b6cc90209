"""The schemas every host types its API from: wit/schemas, with what each
shim fills made optional, so a caller may leave it out.

A shim fills a request's `schemaVersion` (the version it speaks) and `now`
(the host clock, when the caller gives none), at the top of the request and
in a request it carries (render-context's `plan`). A shim adds one field to
one response: render-context's `bodyJson`, the body's exact text. Nothing
else changes: items and every other field are the kernel's contract as it is.

    python3 host-shims/schemas.py OUT_DIR
"""

import json
import pathlib
import sys

#: What the shims fill in a request, when it is absent.
FILLED = ("schemaVersion", "now")
#: The requests a request carries, by command: the shims fill those too.
CARRIED = {"render-context": "plan"}


def host_schema(command: str, schema: dict) -> dict:
    nodes = [schema]
    if command in CARRIED:
        ref = schema["properties"][CARRIED[command]]["$ref"]
        nodes.append(schema["$defs"][ref.removeprefix("#/$defs/")])
    for node in nodes:
        node["required"] = [f for f in node["required"] if f not in FILLED]
    return schema


def with_body_json(schema: dict) -> dict:
    schema["properties"]["bodyJson"] = {"description": "The body's exact text, to send as it is (`body` is it parsed); added by the host.", "type": "string"}
    schema["required"] = sorted([*schema["required"], "bodyJson"])
    return schema


def main(out: pathlib.Path) -> None:
    source = pathlib.Path(__file__).resolve().parent.parent / "wit" / "schemas"
    out.mkdir(parents=True, exist_ok=True)
    for stale in out.glob("*.schema.json"):
        stale.unlink()
    for path in sorted(source.glob("*.schema.json")):
        schema = json.loads(path.read_text())
        if path.name.endswith(".request.schema.json"):
            schema = host_schema(path.name.removesuffix(".request.schema.json"), schema)
        if path.name == "render-context.response.schema.json":
            schema = with_body_json(schema)
        (out / path.name).write_text(json.dumps(schema, indent=2, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main(pathlib.Path(sys.argv[1]))
