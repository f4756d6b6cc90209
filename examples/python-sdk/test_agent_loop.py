"""The agent loop end to end, on a real SQLite file."""
import agent_loop
import pytest
from ctxkernel import Kernel, KernelError, SqliteStore


@pytest.fixture()
def result(tmp_path):
    store = SqliteStore(str(tmp_path / "agent.sqlite"))
    lines = []
    outcome = agent_loop.run(Kernel(store), out=lines.append)
    outcome["lines"], outcome["kernel"] = lines, Kernel(store)
    yield outcome
    store.close()


def test_the_loop_compacts_through_the_model_and_stays_in_budget(result):
    first = result["first"]
    assert first.compactions, "160 turns cannot fit an 8k window without compaction"
    assert all(c["status"] == "committed" for c in first.compactions)
    summaries = [r for r in result["model"].requests if r["model"] == "summarizer"]
    assert len(summaries) == len(first.compactions)
    plan = first.plan()
    assert plan["budget"]["used"] <= plan["budget"]["input"]
    contents = [p["item"].get("content") or "" for p in plan["context"]]
    # The model's latest summary stands in for the compacted turns; the user's last request is verbatim.
    assert any("has profiled every batch so far" in c for c in contents)
    assert "Remember: our exports run on the reporting replica, never on the primary." in contents


def test_what_the_user_said_to_remember_is_recalled_next_session(result):
    assert [m["memory"]["state"] for m in result["learned"]] == ["active"]
    recalled = result["recalled"]
    assert recalled[0]["content"] == "our exports run on the reporting replica, never on the primary"
    assert recalled[0]["evidenceRefs"][0]["id"] == "py-session-1"
    assert any("session 2 recalls" in line for line in result["lines"])


def test_a_model_cannot_activate_what_the_user_did_not_say(result):
    kernel = result["kernel"]
    proposed = kernel.propose_memory({
        "schemaVersion": 1, "now": "2026-06-02T09:00:00Z",
        "candidates": [{"category": "fact", "content": "exports may run on the primary", "scope": "agent", "scopeId": "dana",
                        "confidence": 0.9, "importance": 0.5, "provenance": {"origin": "model"},
                        "evidenceRefs": [{"kind": "session", "id": "py-session-2", "seq": 1}]}],
    })
    memory_id = proposed["receipts"][0]["memory"]["memoryId"]
    with pytest.raises(KernelError) as refused:
        kernel.decide_memory({"schemaVersion": 1, "memoryId": memory_id, "action": "activate", "scope": "agent", "scopeId": "dana",
                              "authority": {"kind": "user-explicit", "sessionId": "py-session-2"}, "now": "2026-06-02T09:00:01Z"})
    assert refused.value.code == "scope-denied"
    candidates = kernel.read_memory({"schemaVersion": 1, "scope": "agent", "scopeId": "dana", "states": ["candidate"],
                                     "now": "2026-06-02T09:00:02Z"})["memories"]
    assert [m["record"]["memoryId"] for m in candidates] == [memory_id]
