"""The agent loop end to end, on a real SQLite file."""
import agent_loop
import pytest
from anthropic.types.message_create_params import MessageCreateParamsNonStreaming
from ctxkernel import Kernel, KernelError, SqliteStore
from pydantic import TypeAdapter


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
    plan = first.kernel.plan_context(first.plan_request())
    assert plan["budget"]["used"] <= plan["budget"]["input"]
    contents = [p["item"].get("content") or "" for p in plan["context"]]
    # The model's latest summary stands in for the compacted turns; the user's last request is verbatim.
    assert any("has profiled every batch so far" in c for c in contents)
    assert "Remember: our exports run on the reporting replica, never on the primary." in contents


def test_every_body_the_model_gets_is_a_request_anthropic_accepts(result):
    bodies = result["assistant"].bodies
    assert len(bodies) == 161, "one call a turn, and one more after the tool ran"
    adapter = TypeAdapter(MessageCreateParamsNonStreaming)
    for body in bodies:
        params = adapter.validate_python(body)
        # `messages` and its blocks are Iterables, which pydantic checks only when read.
        for message in params["messages"]:
            if not isinstance(message["content"], str):
                list(message["content"])
        assert result["kernel"].validate_request({"schemaVersion": 1, "format": "anthropic-messages", "body": body})["valid"]
        assert body["system"] and body["max_tokens"] == agent_loop.MODEL["reservedOutput"]
    # The tool call went out with its result, and later bodies keep the pair or neither.
    asked = bodies[1]["messages"]
    assert [b["type"] for b in asked[-2]["content"]] == ["text", "tool_use"]
    assert asked[-1]["content"][0] == {"type": "tool_result", "tool_use_id": asked[-2]["content"][1]["id"],
                                       "content": agent_loop.FILES["exporter/jobs.py"]}
    for body in bodies:
        uses = {b["id"] for m in body["messages"] if isinstance(m["content"], list) for b in m["content"] if b["type"] == "tool_use"}
        answered = {b["tool_use_id"] for m in body["messages"] if isinstance(m["content"], list) for b in m["content"] if b["type"] == "tool_result"}
        assert uses == answered


def test_the_host_sends_its_whole_history_and_the_kernel_appends_only_the_new_turns(result):
    first = result["first"]
    imports = first.imports
    assert all(len(i["appended"]) <= 3 for i in imports[1:]), "each sync adds the last answer, results and question"
    # The system prompt, the tool and every message but the last answer and the user's last words.
    assert imports[-1]["skipped"] == len(first.messages)
    events = first.kernel.read_events({"schemaVersion": 1, "sessionId": "py-session-1", "limit": 1000})["events"]
    turns = [e["item"] for e in events if e.get("item") and e["item"]["kind"] in ("message", "tool-evidence")]
    assert len(turns) == len(first.messages), "every message once"


def test_what_the_user_said_to_remember_is_recalled_next_session(result):
    assert [m["memory"]["state"] for m in result["learned"]] == ["active"]
    recalled = result["recalled"]
    assert recalled[0]["content"] == "our exports run on the reporting replica, never on the primary"
    assert recalled[0]["evidenceRefs"][0]["id"] == "py-session-1"
    assert any("session 2 recalls" in line for line in result["lines"])


def test_a_model_cannot_activate_what_the_user_did_not_say(result):
    kernel = result["kernel"]
    events = kernel.read_events({"schemaVersion": 1, "sessionId": "py-session-2", "limit": 10})["events"]
    asked = next(e["seq"] for e in events if e["item"].get("role") == "user")
    proposed = kernel.propose_memory({
        "schemaVersion": 1, "now": "2026-06-02T09:00:00Z",
        "candidates": [{"category": "fact", "content": "exports may run on the primary", "scope": "agent", "scopeId": "dana",
                        "confidence": 0.9, "importance": 0.5, "provenance": {"origin": "model"},
                        "evidenceRefs": [{"kind": "session", "id": "py-session-2", "seq": asked}]}],
    })
    memory_id = proposed["receipts"][0]["memory"]["memoryId"]
    with pytest.raises(KernelError) as refused:
        kernel.decide_memory({"schemaVersion": 1, "memoryId": memory_id, "action": "activate", "scope": "agent", "scopeId": "dana",
                              "authority": {"kind": "user-explicit", "sessionId": "py-session-2"}, "now": "2026-06-02T09:00:01Z"})
    assert refused.value.code == "scope-denied"
    candidates = kernel.read_memory({"schemaVersion": 1, "scope": "agent", "scopeId": "dana", "states": ["candidate"],
                                     "now": "2026-06-02T09:00:02Z"})["memories"]
    assert [m["record"]["memoryId"] for m in candidates] == [memory_id]
