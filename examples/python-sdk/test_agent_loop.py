"""The agent loop end to end, on a real SQLite file."""
import agent_loop
import pytest
from anthropic.types.message_create_params import MessageCreateParamsNonStreaming
from ctxkernel_sdk import Kernel, KernelError, SqliteStore
from pydantic import TypeAdapter


@pytest.fixture()
def result(tmp_path):
    store = SqliteStore(str(tmp_path / "agent.sqlite"))
    lines = []
    outcome = agent_loop.run(Kernel(store, clock=agent_loop.Clock()), out=lines.append)
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
    # The system prompt, each tool and every message but the last answer and the user's last words.
    assert imports[-1]["skipped"] == 1 + len(agent_loop.TOOLS) + len(first.messages) - 2
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


def test_a_result_left_out_to_fit_is_read_back_when_the_model_asks(tmp_path):
    store = SqliteStore(str(tmp_path / "agent.sqlite"))
    parts = {f"exporter/part{n}.sql": "\n".join(f"-- part {n}, step {i}: copy the orders of batch {i} into the report table" for i in range(160))
             for n in range(3)}
    files = {**agent_loop.FILES, **parts}
    assistant = agent_loop.ScriptedAssistant(files)
    agent = agent_loop.Agent(Kernel(store, clock=agent_loop.Clock()), "py-read-back", "dana", assistant, agent_loop.RecordedModel(), files=files)
    for path in parts:
        agent.turn(f"Can you look at {path}?")
    assert agent.left_out, "three large files do not all fit an 8k window whole"
    agent.turn("What did the first part say again?")
    # The model asked for the placeholder's handle and got the whole result back, in a valid body.
    asked, answered = assistant.bodies[-1]["messages"][-2:]
    call = next(b for b in asked["content"] if b["type"] == "tool_use")
    assert call["name"] == "read_result" and call["input"]["sha256"] in agent.left_out
    assert answered["content"][0]["tool_use_id"] == call["id"]
    assert answered["content"][0]["content"] in parts.values()
    assert agent.kernel.validate_request({"schemaVersion": 1, "format": "anthropic-messages", "body": assistant.bodies[-1]})["valid"]
    # Only a handle the model was shown is served: nothing else of the session.
    other = agent.kernel.read_events({"schemaVersion": 1, "sessionId": "py-read-back", "limit": 1})["events"][0]["item"]
    assert agent.read_result(other["digest"]).startswith("error:")
    assert agent.read_result("sha256:" + "0" * 64).startswith("error:")
    with pytest.raises(KernelError) as bad:
        agent.kernel.read_events({"schemaVersion": 1, "sessionId": "py-read-back", "contentDigest": "sha256:XYZ"})
    assert "contentDigest" in str(bad.value)
    store.close()
