"""A small agent loop on the ctxkernel Python SDK.

Each turn the agent records what was said, asks the kernel for the context of
its next model call, and compacts when the plan no longer fits the window.
At the end of a session it extracts what the user asked it to remember, and a
later session recalls it. The model is a `RecordedModel` here, replaying
recorded responses, so the loop runs offline and the same way every time;
pass any callable with the same signature to use a real one.

    python agent_loop.py [store.sqlite]
"""
from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

from ctxkernel import Kernel, KernelError, SqliteStore

HERE = Path(__file__).parent
MODEL = {"profile": "small-8k", "window": 8192, "reservedOutput": 1024, "safetyMargin": 256}


class RecordedModel:
    """Answers provider requests from recorded responses, per model, in order."""

    def __init__(self, path: Path = HERE / "recorded_responses.json"):
        self.responses = {model: list(answers) for model, answers in json.loads(path.read_text()).items()}
        self.requests: list[dict] = []

    def __call__(self, request: dict) -> dict:
        self.requests.append(request)
        answers = self.responses.get(request["model"])
        if not answers:
            raise RuntimeError(f"no recorded response left for {request['model']}")
        return answers.pop(0)


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
    model: Callable[[dict], dict]
    clock: Callable[[], str] = field(default_factory=Clock)
    head: int = 0
    compactions: list[dict] = field(default_factory=list)

    def __post_init__(self) -> None:
        try:
            self.head = self.kernel.read_events({"schemaVersion": 1, "sessionId": self.session_id, "limit": 1})["head"]["seq"]
        except KernelError as e:
            if e.code != "not-found":  # a session not started yet
                raise

    def say(self, role: str, text: str) -> None:
        seq = self.head + 1
        item = {
            "schemaVersion": 1, "itemId": f"{self.session_id}-{seq:05d}", "kind": "message", "role": role,
            "content": text, "createdAt": self.clock(), "trust": "user" if role == "user" else "verified",
            "provenance": {"origin": "user" if role == "user" else "model"}, "sensitivity": "internal",
            "allowedSinks": ["model:*"], "scope": "session", "priority": 0, "pinned": False,
            "sourceRef": {"kind": "session", "id": self.session_id, "seq": seq},
        }
        appended = self.kernel.append_events(
            {"schemaVersion": 1, "sessionId": self.session_id, "expectedHead": {"seq": self.head}, "items": [item], "now": self.clock()}
        )
        self.head = appended["head"]["seq"]

    def plan(self) -> dict:
        return self.kernel.plan_context(
            {"schemaVersion": 1, "sessionId": self.session_id, "model": MODEL, "sink": "model:agent", "now": self.clock()}
        )

    def turn(self, user_text: str, reply: str) -> dict:
        """One exchange; compacts first when the conversation no longer fits."""
        self.say("user", user_text)
        plan = self.plan()
        if any(d["reason"] in ("budget-exhausted", "partition-ceiling") for d in plan["dropped"]):
            receipt = self.kernel.compact(
                {"schemaVersion": 1, "sessionId": self.session_id, "model": MODEL, "sink": "model:agent",
                 "strategy": "provider", "provider": {"model": "summarizer", "maxTokens": 600}, "now": self.clock()},
                self.model, self.clock,
            )
            self.compactions.append(receipt)
            self.head = receipt["head"]["seq"]
            plan = self.plan()
        self.say("assistant", reply)
        return plan

    def learn(self) -> list[dict]:
        """Extracts candidates with the model, then activates the ones the user's latest message states."""
        extracted = self.kernel.consolidate(
            {"schemaVersion": 1, "sessionId": self.session_id, "strategy": "provider", "scope": "agent",
             "scopeId": self.user_id, "provider": {"model": "extractor", "maxTokens": 400}, "now": self.clock()},
            self.model, self.clock,
        )
        active = []
        for receipt in extracted["receipts"]:
            active.append(self.kernel.decide_memory(
                {"schemaVersion": 1, "memoryId": receipt["memory"]["memoryId"], "action": "activate", "scope": "agent",
                 "scopeId": self.user_id, "authority": {"kind": "user-explicit", "sessionId": self.session_id},
                 "now": self.clock()}
            ))
        return active

    def recall(self, query: str) -> list[dict]:
        return self.kernel.recall_memory(
            {"schemaVersion": 1, "query": query, "k": 3, "scopes": [{"scope": "agent", "scopeId": self.user_id}],
             "sink": "model:agent", "now": self.clock()}
        )["memories"]


def run(kernel: Kernel, out=print) -> dict:
    """Two sessions on one store: the first works and learns, the second recalls."""
    model, clock = RecordedModel(), Clock()
    first = Agent(kernel, "py-session-1", "dana", model, clock)
    first.turn("The nightly export job times out. Can you look at exporter/jobs.py?", "I'll start with the job's query plan.")
    for n in range(1, 160):
        first.turn(
            f"Step {n}: what did the profile show for the export batch?",
            f"Batch {n}: the join on orders and invoices scans the whole invoices table; an index on invoice.order_id would help. " * 2,
        )
    first.say("user", "Remember: our exports run on the reporting replica, never on the primary.")
    learned = first.learn()
    out(f"session 1: {first.head} events, {len(first.compactions)} compactions, learned {len(learned)} memories")
    for receipt in first.compactions:
        metrics = receipt["compaction"]["metrics"]
        out(f"  compaction {receipt['status']}: {metrics['inputTokens']} -> {metrics['outputTokens']} tokens")

    second = Agent(kernel, "py-session-2", "dana", model, clock)
    second.say("user", "Where should the new export run?")
    recalled = second.recall("where do exports run")
    for memory in recalled:
        origin = memory["evidenceRefs"][0]
        out(f"session 2 recalls: {memory['content']!r} (from {origin['id']} event {origin['seq']})")
    return {"first": first, "learned": learned, "recalled": recalled, "model": model}


if __name__ == "__main__":
    store = SqliteStore(sys.argv[1] if len(sys.argv) > 1 else "agent.sqlite")
    try:
        run(Kernel(store))
    finally:
        store.close()
