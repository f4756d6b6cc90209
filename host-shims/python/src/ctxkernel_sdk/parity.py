"""Runs parity fixtures (tests/parity) against fresh SQLite stores and writes,
per fixture, a transcript of every step and a canonical dump of the final
store — the same bytes every host's runner writes.

Usage: python -m ctxkernel_sdk.parity --out DIR FIXTURE.json...
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
from typing import Any, Optional, cast

from . import Kernel, KernelError, SqliteStore


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


class _Unresolved(Exception):
    """A `$ref` that points at nothing: no such step, a step that answered
    with an error or was an action, or no such member."""

    def __init__(self, reference: str) -> None:
        super().__init__(f"$ref {reference} points at nothing")
        self.reference = reference


def _index(part: str) -> Optional[int]:
    """A JSON Pointer array index: digits, no leading zero (and none longer
    than any array)."""
    canonical = part.isascii() and part.isdigit() and (part == "0" or not part.startswith("0"))
    return int(part) if canonical and len(part) <= 18 else None


def _resolve(value: Any, responses: list[Any]) -> Any:
    if isinstance(value, list):
        return [_resolve(v, responses) for v in value]
    if isinstance(value, dict):
        if "$ref" in value:
            reference = value["$ref"] if isinstance(value["$ref"], str) else ""
            step, hash_, pointer = reference.partition("#")
            digits = step.lstrip("0") or "0"
            at = int(digits) if step.isascii() and step.isdigit() and len(digits) <= 18 else None
            found = responses[at] if at is not None and at < len(responses) else None
            if found is None or not hash_ or (pointer and not pointer.startswith("/")):
                raise _Unresolved(reference)
            for part in pointer.split("/")[1:] if pointer else []:
                part = part.replace("~1", "/").replace("~0", "~")
                if isinstance(found, dict) and part in found:
                    found = found[part]
                elif isinstance(found, list) and (index := _index(part)) is not None and index < len(found):
                    found = found[index]
                else:
                    raise _Unresolved(reference)
            # Only a string is a format.
            if isinstance(value.get("format"), str):
                return value["format"].replace("{}", found if isinstance(found, str) else _json(found))
            return found
        return {k: _resolve(v, responses) for k, v in value.items()}
    return value


def _content(spec: dict[str, Any]) -> bytes:
    if "text" in spec:
        return str(spec["text"]).encode()
    if "repeat" in spec:
        return (str(spec["repeat"]["text"]) * int(spec["repeat"]["times"])).encode()
    raise ValueError('content is {"text"} or {"repeat": {"text", "times"}}')


def _value(store: SqliteStore, key: str) -> bytes:
    entry = store.get(key)
    if entry is None:
        raise ValueError(f"no entry {key!r} to change")
    return entry.value


def _run(fixture: dict[str, Any], path: str) -> str:
    instances: dict[str, Kernel] = {}
    responses: list[Any] = []
    saved: dict[str, bytes] = {}
    lines = []
    stores: dict[str, SqliteStore] = {}
    for i, step in enumerate(fixture["steps"]):
        name = step.get("instance", "a")
        # A step whose reference points at nothing is written down as such; the steps after it still run.
        try:
            resolved = (_resolve(step["key"], responses) if "key" in step else None) if "action" in step else _resolve(step["request"], responses)
        except _Unresolved as e:
            responses.append(None)
            lines.append(f'{{"step":{i},"unresolved":{_json(e.reference)}}}')
            continue
        if "action" in step:
            raw = SqliteStore(path)
            key = cast(str, resolved)
            action = step["action"]
            if action == "reload":
                if name in instances:
                    instances.pop(name)
                    stores.pop(name).close()
            elif action == "corrupt":
                value = bytearray(_value(raw, key))
                value[step.get("offset", 0) % max(len(value), 1)] ^= 0x01
                raw.put(key, bytes(value), None)
            elif action == "replace":
                text = _value(raw, key).decode()
                raw.put(key, text.replace(step["find"], step["with"], 1).encode(), None)
            elif action == "write":
                raw.put(key, step.get("text", "").encode(), None)
            elif action == "remove":
                raw.remove(key, None)
            elif action == "snapshot":
                entry = raw.get(key)
                saved[step["as"]] = entry.value if entry else b""
            elif action == "restore":
                raw.put(key, saved.get(step["from"], b""), None)
            else:
                raise ValueError(f"step {i}: unknown action {action}")
            raw.close()
            responses.append(None)
            lines.append(f'{{"step":{i},"action":{_json(action)}}}')
            continue
        request = resolved if isinstance(resolved, str) else _json(resolved)
        if name not in instances:
            stores[name] = SqliteStore(path)
            instances[name] = Kernel(stores[name])
        kernel = instances[name]
        # The kernel's JSON goes into the transcript verbatim, never parsed and written again.
        try:
            if step["command"] == "get-content":
                data = kernel.get_content(request)
                line = f'{{"step":{i},"bytes":{{"length":{len(data)},"sha256":"{hashlib.sha256(data).hexdigest()}"}}}}'
            else:
                content = _content(step["content"]) if step["command"] == "put-content" else None
                line = f'{{"step":{i},"ok":{kernel.call(step["command"], request, content)}}}'
        except KernelError as e:
            line = f'{{"step":{i},"error":{{"code":"{e.code}","detail":{e.detail_json},"message":{_json(e.message)}}}}}'
        responses.append(json.loads(line).get("ok"))
        lines.append(line)
    for store in stores.values():
        store.close()
    return "".join(line + "\n" for line in lines)


def _dump(path: str) -> str:
    store = SqliteStore(path)
    out, after = [], ""
    while True:
        page = store.scan("", after, 1000)
        out += [f'{{"key":{_json(e.key)},"revision":{e.revision},"sha256":"{hashlib.sha256(e.value).hexdigest()}"}}\n' for e in page]
        if len(page) < 1000:
            break
        after = page[-1].key
    store.close()
    return "".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--read", help="read the store files another host wrote here instead of running")
    parser.add_argument("fixtures", nargs="+")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    for file in args.fixtures:
        with open(file, encoding="utf-8") as f:
            fixture = json.load(f)
        if args.read:
            path = os.path.join(args.read, f"{fixture['name']}.sqlite")
            store = SqliteStore(path)
            info = '{"step":0,"ok":' + Kernel(store).call("info", '{"schemaVersion":1}') + "}"
            store.close()
            with open(os.path.join(args.out, f"{fixture['name']}.read.jsonl"), "w", encoding="utf-8") as f:
                f.write(info + "\n" + _dump(path))
            continue
        path = os.path.join(args.out, f"{fixture['name']}.sqlite")
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(path + suffix):
                os.remove(path + suffix)
        with open(os.path.join(args.out, f"{fixture['name']}.transcript.jsonl"), "w", encoding="utf-8") as f:
            f.write(_run(fixture, path))
        with open(os.path.join(args.out, f"{fixture['name']}.dump.jsonl"), "w", encoding="utf-8") as f:
            f.write(_dump(path))


if __name__ == "__main__":
    main()
