"""A small agent loop on the ctxkernel Python SDK.

The agent keeps its conversation the way Anthropic's Messages API holds it —
`messages` with text, `tool_use` and `tool_result` blocks — and hands the
whole history to the kernel before every model call (`import_messages`
appends only what is new). It then asks the kernel for the request body of
its next call (`render_context`): planned under the model's window, tool
calls kept with their results (an older result too large to keep whole
shows as a placeholder, which the model can read back with `read_result`),
compacted through the model when the conversation no longer fits. At the end of a session it extracts what the
user asked it to remember, and a later session recalls it.

The models are fakes, so the loop runs offline and the same way every time:
`RecordedModel` replays recorded summaries and extractions, and
`ScriptedAssistant` answers each rendered body as Anthropic would, asking
for a file once, and for a result the window left out when the user asks
about it again. Pass any callables with the same signatures to use real ones.

    python agent_loop.py [store.sqlite]
"""
from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ctxkernel_sdk import Kernel, KernelError, SqliteStore

HERE = Path(__file__).parent
MODEL = {"profile": "small-8k", "window": 8192, "reservedOutput": 1024, "safetyMargin": 256}
SYSTEM = "You are a careful engineer helping with a data export service. Answer briefly."
TOOLS = [{
    "name": "read_file",
    "description": "Reads a file of the repository.",
    "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
}, {
    "name": "read_result",
    "description": "Reads back a tool result that was left out to fit the context window, by the sha256 its placeholder names.",
    "input_schema": {"type": "object", "properties": {"sha256": {"type": "string"}}, "required": ["sha256"]},
}]
FILES = {"exporter/jobs.py": "def nightly_export(db):\n    return db.query('SELECT * FROM orders JOIN invoices ON invoices.order_id = orders.id')\n"}
LEFT_OUT = re.compile(r"\[tool result left out to fit the context window: \d+ tokens, content (sha256:[0-9a-f]{64})\]")


class RecordedModel:
    """Answers the kernel's provider requests (summaries, extractions) from recorded responses, per model, in order."""

    def __init__(self, path: Path = HERE / "recorded_responses.json"):
        self.responses = {model: list(answers) for model, answers in json.loads(path.read_text()).items()}
        self.requests: list[dict] = []

    def __call__(self, request: dict) -> dict:
        self.requests.append(request)
        answers = self.responses.get(request["model"])
        if not answers:
            raise RuntimeError(f"no recorded response left for {request['model']}")
        return answers.pop(0)


class ScriptedAssistant:
    """Answers a Messages API request body as the model would: a `tool_use`
    when the user names a file it has not read yet, else a text reply to the
    latest user text. Keeps every body it was sent."""

    def __init__(self, files: dict[str, str] = FILES) -> None:
        self.files = files
        self.bodies: list[dict] = []

    def __call__(self, body: dict) -> dict:
        self.bodies.append(body)
        content = body["messages"][-1]["content"]
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        if any(block["type"] == "tool_result" for block in blocks):
            text = "The query joins orders and invoices without an index on invoice.order_id; I'll profile each batch."
            return {"role": "assistant", "content": [{"type": "text", "text": text}], "stop_reason": "end_turn"}
        last = " ".join(block["text"] for block in blocks if block["type"] == "text")
        left_out = [match for message in body["messages"] for match in LEFT_OUT.findall(json.dumps(message["content"]))]
        if "again" in last and left_out:
            call = {"type": "tool_use", "id": f"toolu_{len(self.bodies):04d}", "name": "read_result", "input": {"sha256": left_out[-1]}}
            return {"role": "assistant", "content": [call], "stop_reason": "tool_use"}
        named = [path for path in self.files if path in last]
        if named:
            call = {"type": "tool_use", "id": f"toolu_{len(self.bodies):04d}", "name": "read_file", "input": {"path": named[0]}}
            return {"role": "assistant", "content": [{"type": "text", "text": "Reading the job first."}, call], "stop_reason": "tool_use"}
        step = last.split(":")[0]
        text = f"{step}: the join on orders and invoices scans the whole invoices table; an index on invoice.order_id would help. " * 2
        return {"role": "assistant", "content": [{"type": "text", "text": text.strip()}], "stop_reason": "end_turn"}


@dataclass
class Clock:
    """Deterministic time: one second a tick from a fixed start."""

    tick: int = 0

    def __call__(self) -> str:
        self.tick += 1
        minutes, seconds = divmod(self.tick, 60)
        hours, minutes = divmod(minutes, 60)
        return f"2026-06-01T{9 + hours:02d}:{minutes:02d}:{seconds:02d}Z"


@dataclass
class Agent:
    kernel: Kernel
    session_id: str
    user_id: str
    assistant: Callable[[dict], dict]
    model: Callable[[dict], dict]
    messages: list[dict] = field(default_factory=list)
    head: int = 0
    compactions: list[dict] = field(default_factory=list)
    imports: list[dict] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=lambda: dict(FILES))
    # The results the model was shown left out, by the handle their placeholder names.
    left_out: set[str] = field(default_factory=set)

    def sync(self) -> None:
        """Hands the whole history to the kernel, which appends only what it does not hold yet."""
        imported = self.kernel.import_messages({
            "sessionId": self.session_id, "expectedHead": {"seq": self.head},
            "format": "anthropic-messages", "sensitivity": "internal", "allowedSinks": ["model:*"],
            "transcript": {"system": SYSTEM, "messages": self.messages, "tools": TOOLS},
        })
        self.imports.append(imported)
        self.head = imported["head"]["seq"]

    def plan_request(self) -> dict:
        return {"sessionId": self.session_id, "model": MODEL, "sink": "model:agent"}

    def render(self) -> dict:
        """The next request body; compacts first when the conversation no longer fits."""
        plan = self.kernel.plan_context(self.plan_request())
        if any(d["reason"] in ("budget-exhausted", "partition-ceiling") for d in plan["dropped"]):
            receipt = self.kernel.compact(
                {"sessionId": self.session_id, "model": MODEL, "sink": "model:agent",
                 "strategy": "provider", "provider": {"model": "summarizer", "maxTokens": 600}},
                self.model,
            )
            self.compactions.append(receipt)
            self.head = receipt["head"]["seq"]
        rendered = self.kernel.render_context({"format": "anthropic-messages", "plan": self.plan_request(),
                                               "policy": {"model": "claude-sonnet-4-5"}})
        self.left_out.update(note["shrunk"]["digest"] for note in rendered["notes"] if note["action"] == "shrunk-result")
        return rendered

    def run_tool(self, call: dict) -> str:
        """A call's result as the model reads it; an unknown tool or a bad handle is an error it can read too."""
        if call["name"] == "read_file":
            return self.files.get(call["input"].get("path"), "no such file")
        if call["name"] == "read_result":
            return self.read_result(str(call["input"].get("sha256", "")))
        return f"error: no tool named {call['name']}"

    def read_result(self, digest: str) -> str:
        """A result the window left out, served back by the kernel. Only a
        placeholder the model was shown is answered: the plan admitted
        that result for this model, and nothing else of the session."""
        handle = digest if digest.startswith("sha256:") else f"sha256:{digest}"
        if handle not in self.left_out:
            return f"error: no result was left out with content {handle}"
        item = self.kernel.read_events({"sessionId": self.session_id, "contentDigest": handle, "limit": 1})["events"][0]["item"]
        if "content" in item:
            return item["content"]
        # An externalized result: its bytes, for this sink.
        request = {"objectId": item["contentRef"]["objectId"], "sink": "model:agent"}
        return self.kernel.get_content(request).decode()

    def turn(self, user_text: str) -> dict:
        """One exchange: the user's text, then model calls until the model stops asking for tools."""
        self.messages.append({"role": "user", "content": user_text})
        while True:
            self.sync()
            rendered = self.render()
            answer = self.assistant(rendered["body"])
            self.messages.append({"role": "assistant", "content": answer["content"]})
            calls = [block for block in answer["content"] if block["type"] == "tool_use"]
            if not calls:
                return rendered
            results = [{"type": "tool_result", "tool_use_id": call["id"], "content": self.run_tool(call)} for call in calls]
            self.messages.append({"role": "user", "content": results})

    def learn(self) -> list[dict]:
        """Extracts candidates with the model, then activates the ones the user's latest message states."""
        self.sync()
        extracted = self.kernel.consolidate(
            {"sessionId": self.session_id, "strategy": "provider", "scope": "agent",
             "scopeId": self.user_id, "provider": {"model": "extractor", "maxTokens": 400}},
            self.model,
        )
        active = []
        for receipt in extracted["receipts"]:
            active.append(self.kernel.decide_memory(
                {"memoryId": receipt["memory"]["memoryId"], "action": "activate", "scope": "agent",
                 "scopeId": self.user_id, "authority": {"kind": "user-explicit", "sessionId": self.session_id}}
            ))
        return active

    def recall(self, query: str) -> list[dict]:
        return self.kernel.recall_memory(
            {"query": query, "k": 3, "scopes": [{"scope": "agent", "scopeId": self.user_id}],
             "sink": "model:agent"}
        )["memories"]


def run(kernel: Kernel, out=print) -> dict:
    """Two sessions on one store: the first works and learns, the second recalls."""
    model, assistant = RecordedModel(), ScriptedAssistant()
    first = Agent(kernel, "py-session-1", "dana", assistant, model)
    first.turn("The nightly export job times out. Can you look at exporter/jobs.py?")
    for n in range(1, 160):
        first.turn(f"Step {n}: what did the profile show for the export batch?")
    first.messages.append({"role": "user", "content": "Remember: our exports run on the reporting replica, never on the primary."})
    learned = first.learn()
    out(f"session 1: {len(first.messages)} messages, {first.head} events, {len(first.compactions)} compactions, learned {len(learned)} memories")
    for receipt in first.compactions:
        metrics = receipt["compaction"]["metrics"]
        out(f"  compaction {receipt['status']}: {metrics['inputTokens']} -> {metrics['outputTokens']} tokens")

    second = Agent(kernel, "py-session-2", "dana", assistant, model)
    second.messages.append({"role": "user", "content": "Where should the new export run?"})
    second.sync()
    recalled = second.recall("where do exports run")
    for memory in recalled:
        origin = memory["evidenceRefs"][0]
        out(f"session 2 recalls: {memory['content']!r} (from {origin['id']} event {origin['seq']})")
    return {"first": first, "learned": learned, "recalled": recalled, "model": model, "assistant": assistant}


if __name__ == "__main__":
    store = SqliteStore(sys.argv[1] if len(sys.argv) > 1 else "agent.sqlite")
    try:
        run(Kernel(store, clock=Clock()))
    finally:
        store.close()
