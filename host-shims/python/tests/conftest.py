import pytest

NOW = "2026-06-01T12:00:00Z"


def item(seq, role, text, **extra):
    return {
        "schemaVersion": 1, "itemId": f"e{seq}", "kind": "message", "role": role, "scope": "session",
        "sourceRef": {"kind": "session", "id": "s1", "seq": seq}, "provenance": {"origin": "user"},
        "trust": "user", "sensitivity": "internal", "allowedSinks": ["model:*"], "priority": 0, "pinned": False,
        "createdAt": NOW, "content": text, **extra,
    }


def append_request(start, count):
    items = [item(s, "user" if s % 2 else "assistant", f"{s}: " + "words of a long session " * 20) for s in range(start + 1, start + count + 1)]
    return {"schemaVersion": 1, "sessionId": "s1", "expectedHead": {"seq": start}, "items": items, "now": NOW}


PLAN = {"schemaVersion": 1, "now": NOW, "sink": "model:test", "sessionId": "s1",
        "model": {"profile": "test", "window": 16000, "reservedOutput": 1000, "safetyMargin": 500}}


def compact_request(strategy):
    return {"schemaVersion": 1, "sessionId": "s1", "now": NOW, "strategy": strategy, "sink": "model:test",
            "model": {"profile": "test", "window": 16000, "reservedOutput": 1000, "safetyMargin": 500},
            "provider": {"model": "summarizer", "maxTokens": 400}}


@pytest.fixture
def seeded():
    from ctxkernel_sdk import Kernel, MemoryStore

    def make():
        kernel = Kernel(MemoryStore(), clock=lambda: NOW)
        kernel.append_events(append_request(0, 120))
        return kernel

    return make
