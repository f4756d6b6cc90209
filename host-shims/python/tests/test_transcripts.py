"""Provider transcripts against the official SDKs' request types.

Sessions are built through the Python host — by `import_messages` in each
provider's format, and by `append_events` of raw context items for what a
transcript cannot say (pending and unknown outcomes, orphan results,
reasoning alone, untrusted instructions), sometimes compacted with the local
strategy — then rendered to every provider format at windows from tiny to
huge. Every body is checked three ways:

1. the SDK's own request type (`anthropic.types.MessageCreateParamsNonStreaming`,
   `openai.types.chat.CompletionCreateParamsNonStreaming`,
   `openai.types.responses.ResponseCreateParamsNonStreaming`), validated by
   pydantic in strict mode with every lazily validated `Iterable` forced,
   and the validated value compared with the body: a key the type does not
   know is dropped by pydantic, so it shows up as a difference;
2. the provider rules that answer 400 when broken (pairing of calls and
   results, Anthropic's first user turn, reasoning followed by its item),
   written here independently of the kernel;
3. the kernel's own `validate_request`.
"""

from __future__ import annotations

import base64
import json
import random
import struct
import zlib
from collections import Counter

import pytest
from pydantic import TypeAdapter, ValidationError

from anthropic.types.message_create_params import MessageCreateParamsNonStreaming
from openai.types.chat.completion_create_params import CompletionCreateParamsNonStreaming
from openai.types.responses.response_create_params import ResponseCreateParamsNonStreaming

from ctxkernel_sdk import Kernel, KernelError, MemoryStore

NOW = "2026-06-01T12:00:00Z"
FORMATS = ("openai-chat", "openai-responses", "anthropic-messages")
SDK_TYPES = {
    "anthropic-messages": MessageCreateParamsNonStreaming,
    "openai-chat": CompletionCreateParamsNonStreaming,
    "openai-responses": ResponseCreateParamsNonStreaming,
}
ADAPTERS = {fmt: TypeAdapter(t) for fmt, t in SDK_TYPES.items()}
#: The fields of a body that hold the transcript.
TRANSCRIPT_KEYS = {
    "openai-chat": ("messages", "tools"),
    "openai-responses": ("input", "instructions", "tools"),
    "anthropic-messages": ("messages", "system", "tools"),
}
#: Render failures that are answers, not faults, below the huge window: the window holds too little, or
#: the plan keeps no conversation (or calls but no tool definitions, which Anthropic needs).
EXPECTED_REFUSALS = ("context-over-budget", "invalid-request")
WINDOWS = (120, 250, 400, 600, 900, 1_400, 2_200, 3_500, 6_000, 12_000, 1_000_000)
POLICIES = ({}, {"unsettledCalls": "hold", "leadingAssistant": "drop"}, {"instructions": "developer", "summary": "system"})
SEEDS = range(24)
STATS: Counter = Counter()


# ---------------------------------------------------------------- the oracle


def force(value):
    """The value with every lazily validated iterable consumed (validating it), as plain lists and dicts."""
    if isinstance(value, dict):
        return {k: force(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [force(v) for v in value]
    if value is None or isinstance(value, (str, bytes, int, float, bool)):
        return value
    try:
        iterator = iter(value)
    except TypeError:
        return value
    return [force(v) for v in iterator]


def differences(sent, validated, path="$"):
    """Where the SDK's validated value differs from the body: dropped keys, coerced values."""
    if isinstance(sent, dict) and isinstance(validated, dict):
        for k in sent:
            if k not in validated:
                yield f"{path}.{k}: not a field of the SDK type (dropped by validation)"
            else:
                yield from differences(sent[k], validated[k], f"{path}.{k}")
    elif isinstance(sent, list) and isinstance(validated, list) and len(sent) == len(validated):
        for i, (a, b) in enumerate(zip(sent, validated)):
            yield from differences(a, b, f"{path}[{i}]")
    elif sent != validated or type(sent) is not type(validated):
        yield f"{path}: sent {sent!r}, the SDK type made it {validated!r}"


def brief(error: ValidationError, limit=8):
    """A union's errors, less those of the members whose `type`/`role` tag does not match."""
    errors = error.errors(include_url=False)
    untagged = {tuple(e["loc"][:-1]) for e in errors if e["type"] == "literal_error" and e["loc"] and e["loc"][-1] in ("type", "role")}
    kept = [e for e in errors if not any(tuple(e["loc"][: len(b)]) == b for b in untagged)] or errors
    lines = [f"{'.'.join(map(str, e['loc']))}: {e['msg']} (input {str(e.get('input'))[:120]!r})" for e in kept[:limit]]
    return f"{len(errors)} errors; " + " | ".join(lines)


def sdk_problems(fmt, body):
    try:
        validated = force(ADAPTERS[fmt].validate_python(body, strict=True))
    except ValidationError as e:
        return [f"SDK {SDK_TYPES[fmt].__module__}.{SDK_TYPES[fmt].__name__} rejects the body: {brief(e)}"]
    return [f"SDK {SDK_TYPES[fmt].__name__}: {d}" for d in differences(body, validated)]


def rule_problems(fmt, body):
    """The provider rules that answer 400, checked here without the kernel."""
    return {"anthropic-messages": anthropic_rules, "openai-chat": chat_rules, "openai-responses": responses_rules}[fmt](body)


def anthropic_rules(body):
    out = []
    messages = body["messages"]
    if not messages:
        return ["messages: empty"]
    if messages[0]["role"] != "user":
        out.append("messages[0]: the first message is not a user message")
    blocks = lambda m: m["content"] if isinstance(m["content"], list) else []  # noqa: E731
    uses_tools = False
    for i, m in enumerate(messages):
        if i and m["role"] == messages[i - 1]["role"]:
            out.append(f"messages[{i}]: two {m['role']} messages in a row")
        if m["content"] in ("", []) and not (m["role"] == "assistant" and i == len(messages) - 1):
            out.append(f"messages[{i}]: empty content")
        for k, b in enumerate(blocks(m)):
            if b["type"] == "text" and b["text"] == "":
                out.append(f"messages[{i}].content[{k}]: empty text block")
        uses = [b["id"] for b in blocks(m) if b["type"] == "tool_use"]
        results = [b["tool_use_id"] for b in blocks(m) if b["type"] == "tool_result"]
        uses_tools |= bool(uses or results)
        for u in uses:
            if not u or any(not (c.isascii() and (c.isalnum() or c in "_-")) for c in u):
                out.append(f"messages[{i}]: tool_use id {u!r} breaks ^[a-zA-Z0-9_-]+$")
        if uses:
            nxt = messages[i + 1] if i + 1 < len(messages) else None
            answered = [b["tool_use_id"] for b in blocks(nxt) if b["type"] == "tool_result"] if nxt and nxt["role"] == "user" else []
            for u in uses:
                if u not in answered:
                    out.append(f"messages[{i}]: tool_use {u!r} has no tool_result in the next message")
        if results:
            prev = messages[i - 1] if i else None
            asked = [b["id"] for b in blocks(prev) if b["type"] == "tool_use"] if prev and prev["role"] == "assistant" else []
            for r in results:
                if r not in asked:
                    out.append(f"messages[{i}]: tool_result {r!r} has no tool_use in the previous message")
            kinds = [b["type"] for b in blocks(m)]
            if kinds[: len(results)] != ["tool_result"] * len(results):
                out.append(f"messages[{i}]: tool_result blocks do not come first")
    if uses_tools and not body.get("tools"):
        out.append("tools: tool blocks without tool definitions")
    return out


def chat_rules(body):
    out = []
    messages = body["messages"]
    if not messages:
        return ["messages: empty"]
    open_calls: list = []
    answering = False
    for i, m in enumerate(messages):
        if m["role"] == "tool":
            if not answering or m["tool_call_id"] not in open_calls:
                out.append(f"messages[{i}]: tool message {m['tool_call_id']!r} does not answer a call of the assistant message before it")
            else:
                open_calls.remove(m["tool_call_id"])
            continue
        for c in open_calls:
            out.append(f"messages[{i}]: tool call {c!r} is not answered before this message")
        open_calls, answering = [], False
        for k, part in enumerate(m["content"] if isinstance(m.get("content"), list) else []):
            if part.get("type") == "file" and not data_url_ok(part["file"].get("file_data")):
                out.append(f"messages[{i}].content[{k}]: file_data {part['file'].get('file_data')!r} is not a base64 data: URL with a payload")
        if m["role"] == "assistant":
            calls = m.get("tool_calls") or []
            for c in calls:
                if len(c["id"]) > 40:
                    out.append(f"messages[{i}]: tool call id {c['id']!r} is longer than 40")
            if not calls and m.get("content") in (None, ""):
                out.append(f"messages[{i}]: an assistant message with neither content nor tool_calls")
            open_calls, answering = [c["id"] for c in calls], bool(calls)
    for c in open_calls:
        out.append(f"tool call {c!r} is never answered")
    return out


def responses_rules(body):
    out = []
    items = body["input"]
    if isinstance(items, str):
        return []
    if not items:
        return ["input: empty"]
    called = set()
    for k, item in enumerate(items):
        parts = item.get("content") if isinstance(item.get("content"), list) else item.get("output") if isinstance(item.get("output"), list) else []
        for j, part in enumerate(parts):
            if part.get("type") == "input_file" and "file_id" not in part and "file_url" not in part and not data_url_ok(part.get("file_data")):
                out.append(f"input[{k}] part {j}: file_data {part.get('file_data')!r} is not a base64 data: URL with a payload")
    calls = ("function_call", "custom_tool_call")
    outputs = {(i["type"], i["call_id"]) for i in items if i.get("type") in ("function_call_output", "custom_tool_call_output")}
    for k, item in enumerate(items):
        kind = item.get("type", "message")
        if kind in calls:
            called.add((kind, item["call_id"]))
            if (f"{kind}_output", item["call_id"]) not in outputs:
                out.append(f"input[{k}]: {kind} {item['call_id']!r} has no {kind}_output")
            if len(item["call_id"]) > 64:
                out.append(f"input[{k}]: call_id longer than 64")
        elif kind.endswith("_output") and kind.removesuffix("_output") in calls and (kind.removesuffix("_output"), item["call_id"]) not in called:
            out.append(f"input[{k}]: {kind} {item['call_id']!r} has no {kind.removesuffix('_output')} before it")
        elif kind == "reasoning":
            nxt = items[k + 1] if k + 1 < len(items) else None
            follows = nxt is not None and (
                nxt.get("type") in ("function_call", "custom_tool_call", "reasoning") or (nxt.get("type", "message") == "message" and nxt.get("role") == "assistant")
            )
            if not follows:
                out.append(f"input[{k}]: reasoning {item['id']!r} is not followed by the assistant message or function call it belongs to (next: {nxt!r})")
    return out


def data_url_ok(url):
    if not isinstance(url, str) or not url.startswith("data:") or ";base64," not in url:
        return False
    return bool(url.split(";base64,", 1)[1])


def check(kernel, fmt, body):
    """Every problem the body has, by the SDK, the provider rules, and the kernel's validate-request."""
    problems = sdk_problems(fmt, body) + [f"provider rule: {p}" for p in rule_problems(fmt, body)]
    answer = kernel.validate_request({"schemaVersion": 1, "format": fmt, "body": body})
    if not answer["valid"]:
        problems.append(f"validate-request: {answer['violations']}")
    STATS[f"bodies {fmt}"] += 1
    return problems


def show(body):
    return json.dumps(body, ensure_ascii=False, sort_keys=True)


# ---------------------------------------------------------------- sessions through the host


def png(seed=0, size=1):
    """A small valid PNG, its colour from `seed`."""
    rgb = bytes([(seed * 67) % 256, (seed * 131 + 40) % 256, (seed * 29 + 90) % 256])
    raw = b"".join(b"\x00" + rgb * size for _ in range(size))

    def chunk(tag, data):
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", size, size, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


def b64png(seed=0):
    return base64.b64encode(png(seed)).decode()


class Session:
    def __init__(self, sid="s", kernel=None):
        self.kernel = kernel or Kernel(MemoryStore())
        self.sid = sid
        self.seq = 0

    def import_(self, fmt, transcript):
        answer = self.kernel.import_messages({
            "schemaVersion": 1, "sessionId": self.sid, "expectedHead": {"seq": self.seq}, "format": fmt, "now": NOW,
            "sensitivity": "internal", "allowedSinks": ["model:*"], "transcript": transcript,
        })
        self.seq = answer["head"]["seq"]
        return answer

    def append(self, items):
        answer = self.kernel.append_events({"schemaVersion": 1, "sessionId": self.sid, "expectedHead": {"seq": self.seq}, "now": NOW, "items": items})
        self.seq = answer["head"]["seq"]
        return answer

    def put_png(self, seed):
        request = {"schemaVersion": 1, "allowedSinks": ["model:*"], "sensitivity": "internal", "now": NOW, "mimeType": "image/png"}
        return self.kernel.put_content(request, png(seed))["contentRef"]

    def compact(self, window, keep_from=None):
        request = {"schemaVersion": 1, "sessionId": self.sid, "now": NOW, "strategy": "local", "sink": "model:test", "force": True,
                   "model": {"profile": "test-model", "window": window, "reservedOutput": 0, "safetyMargin": 0}}
        if keep_from is not None:
            request["keepFromSeq"] = keep_from
        answer = self.kernel.compact_context(request)
        self.seq = self.kernel.read_events({"schemaVersion": 1, "sessionId": self.sid, "limit": 1})["head"]["seq"]
        return answer

    def render(self, fmt, window, policy=None, reserved=64):
        plan = {"schemaVersion": 1, "now": NOW, "sessionId": self.sid, "sink": "model:test",
                "model": {"profile": "test-model", "window": window, "reservedOutput": reserved, "safetyMargin": 0}}
        return self.kernel.render_context({"schemaVersion": 1, "format": fmt, "plan": plan, "policy": policy or {}})

    def sweep(self, windows=WINDOWS, policies=POLICIES, formats=FORMATS):
        """Renders at every window, policy and format; checks every body. Returns (problems, renders)."""
        problems, renders = [], []
        for window in windows:
            for policy in policies:
                for fmt in formats:
                    where = f"{fmt} window={window} policy={policy}"
                    try:
                        r = self.render(fmt, window, policy)
                    except KernelError as e:
                        STATS[f"refused {e.code}"] += 1
                        STATS[f"refused {fmt}: {str(e)[:90]}"] += 1
                        if e.code not in EXPECTED_REFUSALS or window >= 1_000_000:
                            problems.append((where, f"render-context failed: {e} {e.detail_json}", None))
                        continue
                    renders.append((fmt, window, policy, r))
                    if json.loads(r["bodyJson"]) != r["body"]:
                        problems.append((where, "bodyJson is not the body's text", r["body"]))
                    for p in check(self.kernel, fmt, r["body"]):
                        problems.append((where, p, r["body"]))
        return problems, renders


def report(problems, limit=3):
    """An assertion message: the first few problems, each with its exact body."""
    lines = [f"{len(problems)} problems"]
    seen = set()
    for where, problem, body in problems:
        if problem in seen:
            continue
        seen.add(problem)
        lines.append(f"- {where}: {problem}\n  body: {show(body) if body is not None else '-'}")
        if len(seen) >= limit:
            break
    return "\n".join(lines)


# ---------------------------------------------------------------- generated transcripts

WORDS = ["alpha", "beta", "café", "naïve", "☕", "数据", "résumé", "zeta", "ünïcödé", "🙂", "tool", "plan", "window", "Ω", "x"]
TOOL_NAMES = ["search", "read_file", "run-cmd"]
TOOL_SCHEMA = {"type": "object", "properties": {"q": {"type": "string"}, "n": {"type": "integer"}}}
#: Custom (free-form) tools, each with its format in Responses' shape (None: the default, text).
CUSTOM_TOOLS = {"apply_patch": {"type": "grammar", "definition": 'start: "*** Begin Patch" /(.|\\n)*/', "syntax": "lark"},
                "shell": {"type": "text"}, "note": None}


def words(rng, lo=1, hi=40):
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(lo, hi)))


def arguments(rng):
    args = {"q": words(rng, 1, 6)}
    if rng.random() < 0.5:
        args["n"] = rng.randint(0, 9)
    return json.dumps(args, ensure_ascii=rng.random() < 0.5, separators=rng.choice([(",", ":"), (", ", ": ")]))


class Ids:
    """Unique call ids of many shapes: ASCII, unicode, spaces, long enough to be rewritten."""

    def __init__(self, rng, anthropic_safe=False, max_len=None):
        self.rng, self.n, self.safe, self.max_len = rng, 0, anthropic_safe, max_len

    def __call__(self):
        self.n += 1
        n = self.n
        shapes = [f"call_{n}", f"toolu_{n:02d}", f"c-{n}"]
        if not self.safe:
            shapes += [f"call_ü{n}", f"呼叫_{n}", f"call {n}", f"call_{'x' * 40}{n}", f"call_{'y' * 70}{n}", f"id🙂{n}"]
        shapes = [s for s in shapes if self.max_len is None or len(s.encode()) <= self.max_len]
        return self.rng.choice(shapes)


def free_text(rng):
    """A custom tool's input: lines of free text, JSON-looking or not."""
    return "\n".join(rng.choice(["*** Begin Patch", words(rng, 1, 8), '{"not": json', "\\u0041 \t☕", ""]) for _ in range(rng.randint(1, 5)))


def chat_format(fmt):
    if fmt is None or fmt["type"] == "text":
        return fmt
    return {"type": "grammar", "grammar": {"definition": fmt["definition"], "syntax": fmt["syntax"]}}


def chat_tools():
    functions = [{"type": "function", "function": {"name": n, "description": f"the {n} tool", "parameters": TOOL_SCHEMA}} for n in TOOL_NAMES]
    custom = [{"type": "custom", "custom": {"name": n, **({"format": chat_format(f)} if f else {})}} for n, f in CUSTOM_TOOLS.items()]
    return functions + custom


def chat_call(rng, ids):
    if rng.random() < 0.3:
        return {"id": ids(), "type": "custom", "custom": {"name": rng.choice(list(CUSTOM_TOOLS)), "input": free_text(rng)}}
    return {"id": ids(), "type": "function", "function": {"name": rng.choice(TOOL_NAMES), "arguments": arguments(rng)}}


def chat_user(rng, seed, canonical=False):
    if rng.random() < 0.2:
        image = {"url": f"data:image/png;base64,{b64png(seed)}"}
        if rng.random() < 0.5:
            image["detail"] = rng.choice(["low", "high", "auto"])
        return {"role": "user", "content": [{"type": "text", "text": words(rng)}, {"type": "image_url", "image_url": image}]}
    return {"role": "user", "content": words(rng)}


def chat_transcript(rng, turns, canonical=False):
    """A Chat Completions transcript. `canonical`: in the renderer's own shape (results in call order, every call answered)."""
    ids = Ids(rng, max_len=40 if canonical else None)
    messages = []
    if rng.random() < 0.7:
        messages.append({"role": rng.choice(["system", "developer"]), "content": words(rng)})
    messages.append(chat_user(rng, 0))
    for t in range(turns):
        r = rng.random()
        if r < 0.25:
            messages.append(chat_user(rng, t + 1))
        elif r < 0.45:
            messages.append({"role": "assistant", "content": words(rng)})
        elif r < 0.85:
            calls = [chat_call(rng, ids) for _ in range(rng.choice([1, 1, 2, 3]))]
            messages.append({"role": "assistant", "content": words(rng) if rng.random() < 0.3 else None, "tool_calls": calls})
            answered = list(calls)
            if not canonical:
                if rng.random() < 0.15:
                    answered.pop()  # a call without a result
                rng.shuffle(answered)
            for c in answered:
                content = rng.choice(["", words(rng), [{"type": "text", "text": words(rng)}]])
                messages.append({"role": "tool", "tool_call_id": c["id"], "content": content})
        else:
            messages.append({"role": rng.choice(["system", "developer"]), "content": words(rng)})  # mid-conversation
    return {"messages": messages, "tools": chat_tools()}


#: Anthropic's own tools, kept whole: a versioned client tool, a server tool, a toolset.
ANTHROPIC_OWN_TOOLS = [{"type": "bash_20250124", "name": "bash"},
                       {"type": "web_search_20250305", "name": "web_search", "max_uses": 3, "allowed_domains": ["docs.rs"]},
                       {"type": "computer_toolset_20260801"}]
#: Responses' hosted tools, kept whole.
RESPONSES_OWN_TOOLS = [{"type": "web_search"}, {"type": "file_search", "vector_store_ids": ["vs_1"]},
                       {"type": "mcp", "server_label": "deepwiki", "server_url": "https://mcp.deepwiki.com/mcp", "require_approval": "never"}]


def anthropic_tools():
    return [{"name": n, "description": f"the {n} tool", "input_schema": TOOL_SCHEMA} for n in TOOL_NAMES] + ANTHROPIC_OWN_TOOLS


def anthropic_user_blocks(rng, seed):
    blocks = [{"type": "text", "text": words(rng)}]
    if rng.random() < 0.25:
        blocks.append({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": b64png(seed)}})
    return blocks


def anthropic_transcript(rng, turns, canonical=False):
    """A Messages transcript: thinking with signatures, parallel tool_use, error, empty and image results."""
    ids = Ids(rng, anthropic_safe=canonical)
    out = {"tools": anthropic_tools()}
    r = rng.random()
    if r < 0.4:
        out["system"] = words(rng)
    elif r < 0.7:
        out["system"] = [{"type": "text", "text": words(rng)}, {"type": "text", "text": words(rng), "cache_control": {"type": "ephemeral"}}]
    messages = [{"role": "user", "content": words(rng) if rng.random() < 0.5 else anthropic_user_blocks(rng, 0)}]
    for t in range(turns):
        blocks = []
        if rng.random() < 0.4:
            blocks.append({"type": "thinking", "thinking": words(rng), "signature": base64.b64encode(rng.randbytes(24)).decode()})
        if rng.random() < 0.1:
            blocks.append({"type": "redacted_thinking", "data": base64.b64encode(rng.randbytes(16)).decode()})
        calls = [{"type": "tool_use", "id": ids(), "name": rng.choice(TOOL_NAMES), "input": json.loads(arguments(rng))} for _ in range(rng.choice([0, 0, 1, 2, 3]))]
        if rng.random() < 0.7 or not calls:
            blocks.append({"type": "text", "text": words(rng)})
        blocks += calls
        plain = len(blocks) == 1 and blocks[0]["type"] == "text" and rng.random() < 0.6
        messages.append({"role": "assistant", "content": blocks[0]["text"] if plain else blocks})
        # Drawn every turn, so a longer transcript of the same seed starts with this one.
        ends = rng.random() < 0.5
        if t == turns - 1 and not calls and ends:
            break  # ends on the assistant
        answered = list(calls)
        if not canonical and answered and rng.random() < 0.15:
            answered.pop()
        user = []
        for c in answered:
            result = {"type": "tool_result", "tool_use_id": c["id"]}
            choice = rng.random()
            if choice < 0.2:
                result["content"] = ""
            elif choice < 0.35:
                result["content"] = [{"type": "text", "text": words(rng)}, {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": b64png(t + 7)}}]
            else:
                result["content"] = words(rng)
            if rng.random() < 0.25:
                result["is_error"] = True
            user.append(result)
        if not user or rng.random() < 0.4:
            user += anthropic_user_blocks(rng, t + 1)
        plain = len(user) == 1 and user[0]["type"] == "text" and rng.random() < 0.6
        messages.append({"role": "user", "content": user[0]["text"] if plain else user})
    out["messages"] = messages
    return out


def responses_tools():
    functions = [{"type": "function", "name": n, "description": f"the {n} tool", "parameters": TOOL_SCHEMA, "strict": False} for n in TOOL_NAMES]
    return functions + [{"type": "custom", "name": n, **({"format": f} if f else {})} for n, f in CUSTOM_TOOLS.items()] + RESPONSES_OWN_TOOLS


def responses_user(rng, seed):
    if rng.random() < 0.25:
        parts = [{"type": "input_text", "text": words(rng)}, {"type": "input_image", "image_url": f"data:image/png;base64,{b64png(seed)}", "detail": rng.choice(["auto", "low", "high"])}]
        return {"role": "user", "content": parts}
    return {"role": "user", "content": words(rng)}


def responses_transcript(rng, turns, canonical=False):
    """A Responses transcript: reasoning with encrypted_content, parallel function calls, image outputs."""
    ids = Ids(rng, max_len=64 if canonical else None)
    out = {"tools": responses_tools()}
    if rng.random() < 0.7:
        out["instructions"] = words(rng)
    items = [responses_user(rng, 0)]
    n = 0
    for t in range(turns):
        n += 1
        r = rng.random()
        if r < 0.2:
            items.append(responses_user(rng, t + 1))
            continue
        if r < 0.3:
            items.append({"role": rng.choice(["system", "developer"]), "content": words(rng)})  # mid-conversation
            continue
        if rng.random() < 0.5:
            reasoning = {"type": "reasoning", "id": f"rs_{n}", "summary": [{"type": "summary_text", "text": words(rng)}]}
            if rng.random() < 0.8:
                reasoning["encrypted_content"] = "gAAAA" + base64.b64encode(rng.randbytes(30)).decode()
            items.append(reasoning)
        calls = rng.choice([0, 0, 1, 2, 3])
        if not calls or rng.random() < 0.4:
            if rng.random() < 0.6:
                items.append({"type": "message", "role": "assistant", "id": f"msg_{n}", "status": "completed",
                              "content": [{"type": "output_text", "text": words(rng), "annotations": []}]})
            else:
                items.append({"role": "assistant", "content": words(rng)})
        made = []
        for k in range(calls):
            if rng.random() < 0.3:
                call = {"type": "custom_tool_call", "call_id": ids(), "name": rng.choice(list(CUSTOM_TOOLS)), "input": free_text(rng)}
                prefix = "ctc"
            else:
                call = {"type": "function_call", "call_id": ids(), "name": rng.choice(TOOL_NAMES), "arguments": arguments(rng)}
                prefix = "fc"
            if rng.random() < 0.6:
                call["id"] = f"{prefix}_{n}_{k}"
            items.append(call)
            made.append(call)
        answered = list(made)
        if not canonical:
            if answered and rng.random() < 0.15:
                answered.pop()
            rng.shuffle(answered)
        for c in answered:
            if rng.random() < 0.2:
                output = [{"type": "input_text", "text": words(rng)}, {"type": "input_image", "image_url": f"data:image/png;base64,{b64png(n + 3)}", "detail": "auto"}]
            else:
                output = rng.choice(["", words(rng)])
            items.append({"type": f"{c['type']}_output", "call_id": c["call_id"], "output": output})
    out["input"] = items
    return out


GENERATORS = {"openai-chat": chat_transcript, "anthropic-messages": anthropic_transcript, "openai-responses": responses_transcript}


class Items:
    """Raw context items, as a host appends them."""

    def __init__(self, sid):
        self.sid, self.items = sid, []

    def push(self, kind, content, **extra):
        seq = len(self.items) + 1
        item = {"schemaVersion": 1, "itemId": f"{self.sid}-i{seq:04d}", "kind": kind, "scope": "session",
                "sourceRef": {"kind": "session", "id": self.sid, "seq": seq}, "provenance": {"origin": "user"},
                "trust": "user", "sensitivity": "internal", "allowedSinks": ["model:*"], "priority": 0, "pinned": False,
                "createdAt": NOW, "content": content}
        item.update(extra)
        self.items.append(item)
        return item

    def user(self, text, **extra):
        return self.push("message", text, role="user", **extra)

    def assistant(self, text, **extra):
        extra.setdefault("trust", "verified")
        extra.setdefault("provenance", {"origin": "model"})
        return self.push("message", text, role="assistant", **extra)

    def call(self, text, ids, name="search", **extra):
        calls = [{"callId": i, "name": name, "arguments": json.dumps({"q": i}, ensure_ascii=False)} for i in ids]
        return self.assistant(text, toolCalls=calls, **extra)

    def result(self, call_id, text, outcome="success", **extra):
        return self.push("tool-evidence", text, trust="verified", provenance={"origin": "tool"}, toolResult={"callId": call_id, "outcome": outcome}, **extra)

    def system(self, text, role="system", trust="host"):
        return self.push("message", text, role=role, trust=trust, provenance={"origin": "host"})

    def tools(self):
        for name in TOOL_NAMES:
            self.push("tool-schema", None, itemId=f"{self.sid}-tool-{name}", trust="host", provenance={"origin": "host"}, priority=10, pinned=True,
                      sourceRef={"kind": "host", "id": self.sid}, tool={"name": name, "description": f"the {name} tool", "inputSchema": TOOL_SCHEMA})


def raw_session(rng, session, turns):
    """Raw items: outcomes of every kind, orphans, thinking, reasoning (alone too), images, untrusted instructions."""
    it = Items(session.sid)
    ids = Ids(rng)
    image = session.put_png(rng.randint(0, 99))
    it.tools()
    if rng.random() < 0.7:
        it.system(words(rng))
    it.user(words(rng))
    open_calls = []
    for t in range(turns):
        r = rng.random()
        if r < 0.15:
            it.user(words(rng))
        elif r < 0.22:
            it.user(None, parts=[{"kind": "text", "text": words(rng)}, {"kind": "image", "contentRef": image, "mediaType": "image/png"}])
        elif r < 0.32:
            it.assistant(words(rng))
        elif r < 0.40:
            it.assistant(None, parts=[{"kind": "thinking", "text": words(rng), "signature": "c2ln" + str(t)}, {"kind": "text", "text": words(rng)}])
        elif r < 0.47:
            parts = [{"kind": "reasoning", "id": f"rs_raw{t}", "summary": [words(rng)], "encryptedContent": "gAAAA" + str(t)}]
            if rng.random() < 0.6:
                parts.append({"kind": "text", "text": words(rng)})
            it.assistant(None, parts=parts)  # without text: reasoning without its following item
        elif r < 0.65:
            new = [ids() for _ in range(rng.choice([1, 1, 2, 3]))]
            extra = {}
            if rng.random() < 0.3:
                extra = {"content": None, "parts": [{"kind": "reasoning", "id": f"rs_c{t}", "summary": [], "encryptedContent": "gAAAB" + str(t)}]}
            if rng.random() < 0.2 and not extra:
                extra = {"content": None, "parts": [{"kind": "thinking", "text": words(rng), "signature": "c2ln"}]}
            it.call(extra.pop("content", words(rng) if rng.random() < 0.3 else ""), new, name=rng.choice(TOOL_NAMES), **extra)
            open_calls += new
        elif r < 0.85 and open_calls:
            call = open_calls.pop(rng.randrange(len(open_calls)))
            outcome = rng.choice(["success", "success", "error", "pending", "unknown"])
            it.result(call, rng.choice(["", words(rng)]), outcome)
            if outcome in ("pending", "unknown") and rng.random() < 0.5:
                it.result(call, words(rng), "success")  # settles later
        elif r < 0.9:
            it.result(f"orphan-{t}", words(rng))
        elif r < 0.95:
            it.system(words(rng), role=rng.choice(["system", "developer"]), trust=rng.choice(["host", "verified", "untrusted"]))
        else:
            it.push("system-policy", words(rng), trust=rng.choice(["host", "external"]), provenance={"origin": "host"})
    session.append(it.items)
    return it


def build(kind, seed):
    """One generated session of `kind` (a format to import, or `raw`), maybe compacted."""
    rng = random.Random(f"{kind}/{seed}")
    session = Session(sid=f"{kind}-{seed}")
    turns = rng.randint(1, 24)
    if kind == "raw":
        raw_session(rng, session, turns)
    else:
        session.import_(kind, GENERATORS[kind](random.Random(f"{kind}/{seed}/t"), turns))
        if rng.random() < 0.3:
            # The host re-sends the history with more turns: only the new ones are appended.
            try:
                session.import_(kind, GENERATORS[kind](random.Random(f"{kind}/{seed}/t"), turns + rng.randint(1, 6)))
                STATS["re-imported"] += 1
            except KernelError as e:
                STATS[f"re-import refused {e.code}"] += 1
    if rng.random() < 0.4:
        window = rng.choice([300, 800, 2_000])
        keep = rng.randint(1, session.seq) if rng.random() < 0.6 else None
        try:
            session.compact(window, keep)
            STATS["compacted"] += 1
        except KernelError as e:
            STATS[f"compaction refused {e.code}"] += 1
    return session


# ---------------------------------------------------------------- the tests


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("kind", ["openai-chat", "anthropic-messages", "openai-responses", "raw"])
def test_every_render_of_generated_sessions_is_a_request_the_sdk_types_accept(kind, seed):
    session = build(kind, seed)
    STATS["sessions"] += 1
    problems, renders = session.sweep()
    assert renders, "some window renders"
    assert not problems, report(problems)


def test_fixed_sessions_cover_every_feature_in_every_format():
    """One hand-written transcript per provider, with every feature the brief names, rendered everywhere."""
    chat = {"messages": [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": [{"type": "text", "text": "Find both files, café ☕."},
                                     {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{b64png(1)}", "detail": "low"}}]},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_ü1", "type": "function", "function": {"name": "search", "arguments": "{\"q\": \"a\",  \"n\":1}"}},
            {"id": "呼叫_2", "type": "function", "function": {"name": "search", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "呼叫_2", "content": ""},
        {"role": "tool", "tool_call_id": "call_ü1", "content": "found a"},
        {"role": "developer", "content": "Answer in one line."},
        {"role": "assistant", "content": "Both found."},
        {"role": "user", "content": "now run it"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "call_" + "z" * 60, "type": "function", "function": {"name": "run-cmd", "arguments": "{}"}}]},
    ], "tools": chat_tools()}
    anthropic = {"system": [{"type": "text", "text": "You are terse."}, {"type": "text", "text": "Cite files.", "cache_control": {"type": "ephemeral"}}],
                 "messages": [
        {"role": "user", "content": [{"type": "text", "text": "What is in this image?"},
                                     {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": b64png(2)}}]},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "Two searches.", "signature": "EqQBCkYIBxgCKkBzaWduYXR1cmU="},
            {"type": "redacted_thinking", "data": "cmVkYWN0ZWQ="},
            {"type": "text", "text": "Searching."},
            {"type": "tool_use", "id": "toolu_01", "name": "search", "input": {"q": "a"}},
            {"type": "tool_use", "id": "toolu_02", "name": "read_file", "input": {"q": "b"}},
            {"type": "tool_use", "id": "toolu_03", "name": "run-cmd", "input": {}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_01", "content": "found a"},
            {"type": "tool_result", "tool_use_id": "toolu_02", "content": "disk error", "is_error": True},
            {"type": "tool_result", "tool_use_id": "toolu_03", "content": [{"type": "text", "text": "screenshot"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": b64png(3)}}]},
            {"type": "text", "text": "and?"}]},
        {"role": "assistant", "content": [{"type": "thinking", "thinking": "One failed.", "signature": "c2lnMg=="}, {"type": "text", "text": "One failed."}]},
    ], "tools": anthropic_tools()}
    responses = {"instructions": "You are terse.", "input": [
        {"role": "user", "content": [{"type": "input_text", "text": "Find both files."},
                                     {"type": "input_image", "image_url": f"data:image/png;base64,{b64png(4)}", "detail": "high"}]},
        {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "Two searches."}], "encrypted_content": "gAAAAABencrypted=="},
        {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "search", "arguments": "{\"q\":\"a\"}"},
        {"type": "function_call", "id": "fc_2", "call_id": "call_ü2", "name": "search", "arguments": "{\"q\":\"b\"}"},
        {"type": "function_call_output", "call_id": "call_ü2", "output": ""},
        {"type": "function_call_output", "call_id": "call_1", "output": [{"type": "input_text", "text": "found a"},
                                                                          {"type": "input_image", "image_url": f"data:image/png;base64,{b64png(5)}", "detail": "auto"}]},
        {"role": "developer", "content": "Answer in one line."},
        {"type": "reasoning", "id": "rs_2", "summary": [], "encrypted_content": "gAAAAABmore=="},
        {"type": "message", "role": "assistant", "id": "msg_1", "status": "completed", "content": [{"type": "output_text", "text": "Both found.", "annotations": []}]},
    ], "tools": responses_tools()}
    problems = []
    for fmt, transcript in [("openai-chat", chat), ("anthropic-messages", anthropic), ("openai-responses", responses)]:
        session = Session(sid=f"fixed-{fmt}")
        session.import_(fmt, transcript)
        found, renders = session.sweep()
        problems += found
        assert any(w == 1_000_000 for _, w, _, _ in renders), f"{fmt}: the huge window renders"
    assert not problems, report(problems)


# ---------------------------------------------------------------- the five 400s


def sweep_notes(renders):
    return Counter(n["action"] for *_, r in renders for n in r["notes"])


def test_regression_first_message_assistant_after_truncation():
    s = Session("lead")
    it = Items(s.sid)
    it.user("old question " + "long words here " * 200)
    it.assistant("an answer that survives truncation " * 4)
    it.user("a short follow-up")
    s.append(it.items)
    problems, renders = s.sweep(windows=range(100, 1_200, 20))
    assert not problems, report(problems)
    anthropic = [r for fmt, _, _, r in renders if fmt == "anthropic-messages"]
    assert all(r["body"]["messages"][0]["role"] == "user" for r in anthropic)
    notes = sweep_notes(renders)
    assert notes["inserted-turn"] > 0, f"some window keeps the assistant turn but not the user turn before it: {notes}"
    firsts = {r["body"]["messages"][0]["role"] for fmt, _, _, r in renders if fmt == "openai-chat"}
    assert "assistant" in firsts, "the kept context starts with an assistant turn somewhere (Chat keeps it as is)"


def test_regression_tool_result_without_tool_use():
    s = Session("orphan")
    it = Items(s.sid)
    it.tools()
    it.user("go")
    it.result("ghost-1", "orphan text 1")  # its call was never recorded
    it.call("", ["c1"])
    it.result("c1", "ok")
    it.result("ghost-2", "orphan text 2", "error")
    it.user("status? " + "filler " * 120)
    it.call("again", ["c2", "c3"])
    it.result("c3", "three " * 60)
    it.result("c2", "two " * 60)
    it.user("done?")
    s.append(it.items)
    problems, renders = s.sweep(windows=list(range(100, 1_500, 40)) + [1_000_000])
    assert not problems, report(problems)
    assert not any("orphan text" in show(r["body"]) for *_, r in renders), "results without their call are left out"


def test_regression_tool_use_without_result():
    s = Session("unanswered")
    it = Items(s.sid)
    it.tools()
    it.user("go")
    it.call("three at once", ["p1", "p2", "p3", "p4"])
    it.result("p1", "ok")
    it.result("p2", "running", "pending")
    it.result("p3", "?", "unknown")
    # p4: no result at all
    it.user("status?")
    it.call("", ["q1"])  # the session ends on a call
    s.append(it.items)
    problems, renders = s.sweep()
    assert not problems, report(problems)
    notes = sweep_notes(renders)
    assert notes["synthesized-result"] > 0 and notes["held-back"] > 0, notes
    # The same through an import: a Chat transcript whose last call is unanswered.
    s2 = Session("unanswered-import")
    s2.import_("openai-chat", {"messages": [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "call_a", "type": "function", "function": {"name": "search", "arguments": "{}"}}]},
    ], "tools": chat_tools()})
    problems, renders = s2.sweep()
    assert not problems, report(problems)


def test_regression_reasoning_without_its_following_item():
    s = Session("reasoning")
    it = Items(s.sid)
    it.tools()
    it.user("think")
    it.assistant(None, parts=[{"kind": "reasoning", "id": "rs_alone", "summary": ["thought"], "encryptedContent": "gAAAAalone"}])
    it.user("again " + "filler " * 100)
    it.assistant(None, parts=[{"kind": "reasoning", "id": "rs_before_call", "summary": [], "encryptedContent": "gAAAAcall"}],
                 toolCalls=[{"callId": "r1", "name": "search", "arguments": "{}"}])
    it.result("r1", "result " * 50)
    it.assistant(None, parts=[{"kind": "reasoning", "id": "rs_text", "summary": [], "encryptedContent": "gAAAAtext"}, {"kind": "text", "text": "answer"}])
    s.append(it.items)
    problems, renders = s.sweep(windows=list(range(100, 1_000, 30)) + [1_000_000])
    assert not problems, report(problems)
    # Through an import too: reasoning then a call, truncated and compacted.
    s2 = Session("reasoning-import")
    s2.import_("openai-responses", {"input": [
        {"role": "user", "content": "go " * 100},
        {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "plan"}], "encrypted_content": "gAAAA1"},
        {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "search", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_1", "output": "out " * 100},
        {"type": "reasoning", "id": "rs_2", "summary": [], "encrypted_content": "gAAAA2"},
        {"type": "message", "role": "assistant", "id": "msg_2", "status": "completed", "content": [{"type": "output_text", "text": "done", "annotations": []}]},
        {"role": "user", "content": "more"},
    ], "tools": responses_tools()})
    problems, _ = s2.sweep(windows=list(range(100, 1_000, 30)))
    s2.compact(400, keep_from=3)
    more, _ = s2.sweep()
    assert not problems + more, report(problems + more)


def test_regression_orphan_function_call_output_after_compaction():
    transcript = {"instructions": "You are terse.", "input": [
        {"role": "user", "content": "Find both files. " * 30},
        {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "Two searches."}], "encrypted_content": "gAAAA"},
        {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "search", "arguments": "{\"q\":\"a\"}"},
        {"type": "function_call", "id": "fc_2", "call_id": "call_2", "name": "search", "arguments": "{\"q\":\"b\"}"},
        {"type": "function_call_output", "call_id": "call_1", "output": "found a " * 40},
        {"type": "function_call_output", "call_id": "call_2", "output": ""},
        {"type": "message", "role": "assistant", "id": "msg_1", "status": "completed", "content": [{"type": "output_text", "text": "Both found.", "annotations": []}]},
        {"role": "user", "content": "thanks"},
    ], "tools": responses_tools()}
    problems = []
    for keep in [None, 3, 4, 5, 6, 7, 8]:
        s = Session(f"fco-{keep}")
        s.import_("openai-responses", transcript)
        s.compact(600, keep_from=keep)
        found, _ = s.sweep()
        problems += found
    # And an output whose call the session never had.
    s = Session("fco-raw")
    it = Items(s.sid)
    it.tools()
    it.user("hi")
    it.result("call_gone", "orphan output")
    it.user("bye")
    s.append(it.items)
    found, renders = s.sweep()
    problems += found
    assert not problems, report(problems)
    assert not any("orphan output" in show(r["body"]) for *_, r in renders)


def test_reasoning_is_not_sent_with_an_invented_empty_assistant_message():
    """A reasoning item alone (an output cut off mid-reasoning) has no item it belongs to. Public reports
    (openai/openai-node#1567) show the Responses API answering 400 "reasoning ... was provided without its
    required following item" when a reasoning item is followed by an assistant message that is not its own;
    an empty message the renderer makes up is not its own."""
    s = Session("reasoning-alone")
    it = Items(s.sid)
    it.user("think")
    it.assistant(None, parts=[{"kind": "reasoning", "id": "rs_alone", "summary": ["thought"], "encryptedContent": "gAAAAalone"}])
    it.user("and?")
    s.append(it.items)
    body = s.render("openai-responses", 1_000_000)["body"]
    invented = [
        (k, body["input"][k + 1]) for k, item in enumerate(body["input"][:-1])
        if item.get("type") == "reasoning" and body["input"][k + 1].get("role") == "assistant" and body["input"][k + 1].get("content") in ("", [])
    ]
    assert not invented, f"reasoning followed by an empty assistant message: {invented}\nbody: {show(body)}"


def calls_tools(fmt, body):
    if fmt == "openai-chat":
        return any(m.get("tool_calls") or m["role"] == "tool" for m in body["messages"])
    if fmt == "openai-responses":
        return any(i.get("type") in ("function_call", "function_call_output") for i in body["input"])
    return any(b["type"] in ("tool_use", "tool_result") for m in body["messages"] if isinstance(m["content"], list) for b in m["content"])


@pytest.mark.parametrize("fmt", FORMATS)
def test_compaction_keeps_the_tool_definitions_of_the_calls_it_keeps(fmt):
    """Compacting an imported session whose tools came in with the transcript: the calls kept after the
    cut still need their tools (Anthropic refuses tool blocks without `tools`; a model without its tools
    cannot call them again)."""
    transcript = json.loads(json.dumps(CANONICAL[fmt]))
    key = "input" if fmt == "openai-responses" else "messages"
    filler = [{"role": "user", "content": "earlier question " * 30}, {"role": "assistant", "content": "earlier answer " * 30}] * 3
    lead = 1 if fmt == "openai-chat" else 0  # after Chat's system message
    transcript[key][lead:lead] = filler
    s = Session(f"compact-tools-{fmt}")
    s.import_(fmt, transcript)
    events = s.kernel.read_events({"schemaVersion": 1, "sessionId": s.sid, "limit": 100})["events"]
    first_call = min(e["seq"] for e in events if e.get("item", {}).get("toolCalls"))
    s.compact(600, keep_from=first_call)
    problems = []
    for target in FORMATS:
        try:
            body = s.render(target, 1_000_000)["body"]
        except KernelError as e:
            problems.append(f"{target}: render-context refused at the huge window: {e}")
            continue
        assert calls_tools(target, body), f"the calls after the cut are kept: {show(body)}"
        if not body.get("tools"):
            problems.append(f"{target}: the body calls tools but defines none: {show(body)}")
    assert not problems, "\n".join(problems)


PDF = base64.b64encode(b"%PDF-1.4\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF").decode()
DOCUMENTS = {
    "anthropic-messages": {"messages": [
        {"role": "user", "content": [
            {"type": "text", "text": "read these"},
            {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": PDF}, "title": "a.pdf"},
            {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "plain document text"}, "title": "b.txt"},
            {"type": "image", "source": {"type": "url", "url": "https://example.com/x.png"}}]},
        {"role": "assistant", "content": "ok"}]},
    "openai-chat": {"messages": [
        {"role": "user", "content": [
            {"type": "text", "text": "read these"},
            {"type": "file", "file": {"file_data": f"data:application/pdf;base64,{PDF}", "filename": "a.pdf"}}]},
        {"role": "assistant", "content": "ok"}]},
    "openai-responses": {"input": [
        {"role": "user", "content": [
            {"type": "input_text", "text": "read these"},
            {"type": "input_file", "file_data": f"data:application/pdf;base64,{PDF}", "filename": "a.pdf"},
            {"type": "input_file", "file_data": "data:text/plain;base64," + base64.b64encode(b"plain document text").decode(), "filename": "b.txt"}]},
        {"role": "assistant", "content": "ok"}]},
}


@pytest.mark.parametrize("source", FORMATS)
def test_documents_render_to_every_format(source):
    """PDF and plain-text documents (and a URL image), imported in one format, rendered to every other."""
    s = Session(f"docs-{source}")
    s.import_(source, DOCUMENTS[source])
    problems, _ = s.sweep(windows=(1_000_000,), policies=({},))
    assert not problems, report(problems)


def test_body_json_is_the_body_as_the_kernel_wrote_it():
    session = Session("body-json")
    session.kernel.import_messages({"schemaVersion": 1, "sessionId": "body-json", "expectedHead": {"seq": 0}, "now": NOW,
        "format": "openai-chat", "sensitivity": "internal", "allowedSinks": ["model:*"], "transcript": {"messages": [
            {"role": "user", "content": "q \"}]\\ ☕ \u2028"},
            {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function",
             "function": {"name": "f", "arguments": '{"n": 1.50, "big": 123456789012345678901234567890, "s": "}\\""}'}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "ok"}]}})
    for fmt in FORMATS:
        r = session.render(fmt, 100_000)
        whole = session.kernel.call("render-context", {"schemaVersion": 1, "format": fmt, "plan": {"schemaVersion": 1, "now": NOW,
            "sessionId": "body-json", "sink": "model:test", "model": {"profile": "test-model", "window": 100_000, "reservedOutput": 64, "safetyMargin": 0}},
            "policy": {}})
        assert f',"body":{r["bodyJson"]},"budget":' in whole, fmt
        assert json.loads(r["bodyJson"]) == r["body"]
    # Anthropic's input keeps the number as written; only the text has it so.
    assert "1.50" in session.render("anthropic-messages", 100_000)["bodyJson"]


def test_the_oracle_catches_what_it_is_meant_to():
    """Bodies each check must refuse: so a green run means something."""
    a = {"model": "m", "max_tokens": 5}
    bad_media = {**a, "messages": [{"role": "user", "content": [{"type": "text", "text": "x"}, {"type": "image", "source": {"type": "base64", "media_type": "image/svg+xml", "data": "AA=="}}]}]}
    assert ADAPTERS["anthropic-messages"].validate_python(bad_media, strict=True), "pydantic validates the Iterable lazily..."
    assert sdk_problems("anthropic-messages", bad_media), "...and forcing it finds the bad block"
    assert sdk_problems("anthropic-messages", {**a, "messages": [{"role": "user", "content": [{"type": "text", "text": "x", "bogus": 1}]}]}), "unknown keys"
    assert sdk_problems("anthropic-messages", {**a, "max_tokens": "5", "messages": [{"role": "user", "content": "x"}]}), "strict: no coercion"
    assert sdk_problems("openai-chat", {"model": "m", "messages": [{"role": "tool", "content": "r"}]}), "tool message without tool_call_id"
    assert sdk_problems("openai-responses", {"model": "m", "input": [{"type": "reasoning", "id": "rs_1"}]}), "reasoning without summary"
    assert sdk_problems("openai-responses", {"model": "m", "input": [{"type": "function_call", "call_id": "c", "name": "f"}]}), "call without arguments"
    assert not sdk_problems("openai-chat", {"model": "m", "messages": [{"role": "user", "content": "x"}]})
    assert anthropic_rules({"messages": [{"role": "assistant", "content": "x"}]})
    assert anthropic_rules({"messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "r"}]}], "tools": [{}]})
    assert anthropic_rules({"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "f", "input": {}}]}], "tools": [{}]})
    assert chat_rules({"messages": [{"role": "user", "content": "x"}, {"role": "tool", "tool_call_id": "c", "content": "r"}]})
    assert chat_rules({"messages": [{"role": "assistant", "content": None, "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}, {"role": "user", "content": "x"}]})
    assert responses_rules({"input": [{"type": "function_call_output", "call_id": "c", "output": "x"}]})
    assert responses_rules({"input": [{"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"}]})
    assert responses_rules({"input": [{"role": "user", "content": "x"}, {"type": "reasoning", "id": "rs_1", "summary": []}, {"role": "user", "content": "y"}]})
    assert responses_rules({"input": [{"role": "user", "content": [{"type": "input_file", "file_data": "", "filename": "b.txt"}]}]})
    # A custom tool's call answered by a function's output is not answered.
    crossed = [{"role": "user", "content": "x"}, {"type": "custom_tool_call", "call_id": "c", "name": "shell", "input": "ls"},
               {"type": "function_call_output", "call_id": "c", "output": "o"}]
    assert len(responses_rules({"input": crossed})) == 2
    assert sdk_problems("openai-chat", {"model": "m", "messages": [{"role": "user", "content": "x"}],
                                        "tools": [{"type": "custom", "custom": {"name": "f", "format": {"type": "grammar", "definition": "x", "syntax": "lark"}}}]})


# ---------------------------------------------------------------- round trip


def transcript_of(fmt, body):
    return {k: body[k] for k in TRANSCRIPT_KEYS[fmt] if k in body}


CANONICAL = {
    "openai-chat": {"messages": [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": [{"type": "text", "text": "Find both files, café ☕."}, {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{b64png(9)}", "detail": "low"}}]},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_ü1", "type": "function", "function": {"name": "search", "arguments": "{\"q\": \"a\",  \"n\":1}"}},
            {"id": "call_2", "type": "function", "function": {"name": "search", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "call_ü1", "content": "found a"},
        {"role": "tool", "tool_call_id": "call_2", "content": ""},
        {"role": "developer", "content": "Answer in one line."},
        {"role": "assistant", "content": "Both found."},
    ], "tools": [{"type": "function", "function": {"name": "search", "description": "Search files", "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}}]},
    "anthropic-messages": {"system": "You are terse.", "messages": [
        {"role": "user", "content": [{"type": "text", "text": "Find both files."}, {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": b64png(8)}}]},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "Two searches.", "signature": "c2lnbmF0dXJl"},
            {"type": "text", "text": "Searching."},
            {"type": "tool_use", "id": "toolu_01", "name": "search", "input": {"q": "a"}},
            {"type": "tool_use", "id": "toolu_02", "name": "search", "input": {"q": "b"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_01", "content": "found a"},
            {"type": "tool_result", "tool_use_id": "toolu_02", "content": "disk error", "is_error": True}]},
        {"role": "assistant", "content": "One failed."},
    ], "tools": [{"name": "search", "input_schema": {"type": "object"}}]},
    "openai-responses": {"instructions": "You are terse.", "input": [
        {"role": "user", "content": "Find both files."},
        {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "Two searches."}], "encrypted_content": "gAAAA"},
        {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "search", "arguments": "{\"q\":\"a\"}"},
        {"type": "function_call", "id": "fc_2", "call_id": "call_2", "name": "search", "arguments": "{\"q\":\"b\"}"},
        {"type": "function_call_output", "call_id": "call_1", "output": "found a"},
        {"type": "function_call_output", "call_id": "call_2", "output": ""},
        {"type": "message", "role": "assistant", "id": "msg_1", "status": "completed", "content": [{"type": "output_text", "text": "Both found.", "annotations": []}]},
    ], "tools": [{"type": "function", "name": "search", "parameters": {"type": "object"}, "strict": False}]},
}


def round_trip(fmt, transcript, sid):
    session = Session(sid)
    session.import_(fmt, transcript)
    r = session.render(fmt, 1_000_000, reserved=1024)
    body = r["body"]
    problems = check(session.kernel, fmt, body)
    again = session.import_(fmt, transcript)
    return transcript_of(fmt, body), r["notes"], problems, again


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_canonical_transcript_round_trips_exactly(fmt):
    transcript = CANONICAL[fmt]
    assert not sdk_problems(fmt, {**transcript, "model": "m", "max_tokens": 5} if fmt == "anthropic-messages" else {**transcript, "model": "m"}), "the fixture itself is a valid request"
    rendered, notes, problems, again = round_trip(fmt, transcript, f"rt-{fmt}")
    assert rendered == transcript, f"notes={notes}\nrendered: {show(rendered)}\noriginal: {show(transcript)}"
    assert notes == []
    assert not problems, problems
    assert again["appended"] == [], "importing the same transcript again appends nothing"


@pytest.mark.parametrize("seed", range(16))
@pytest.mark.parametrize("fmt", FORMATS)
def test_generated_canonical_transcripts_round_trip_exactly(fmt, seed):
    rng = random.Random(f"canonical/{fmt}/{seed}")
    transcript = GENERATORS[fmt](rng, rng.randint(1, 16), canonical=True)
    rendered, notes, problems, _ = round_trip(fmt, transcript, f"rtg-{fmt}-{seed}")
    assert not problems, "\n".join(problems) + "\nbody: " + show(rendered)
    assert rendered == transcript, f"notes={notes}\nrendered: {show(rendered)}\noriginal: {show(transcript)}"


def test_zz_stats():
    """Not a check: the numbers, for `pytest -s`."""
    print("\ntranscript stats:", dict(sorted(STATS.items())))
