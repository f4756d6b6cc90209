"""The typed API: item constructors held to the shared file every host is
held to, requests filled by the shim, provider answers of the wrong shape,
logging, and mypy --strict on a caller's code."""

import asyncio
import json
import logging
import pathlib
import re
import subprocess
import sys
from datetime import datetime, timedelta, timezone

import pytest

from ctxkernel_sdk import Kernel, KernelError, MemoryStore, items
from ctxkernel_sdk._kernel import CARRIED, COMMANDS, TAKES_NOW

from conftest import NOW, PLAN, compact_request

ROOT = pathlib.Path(__file__).resolve().parents[3]
CONSTRUCTORS = json.loads((ROOT / "tests" / "items" / "constructors.json").read_text())
MAKERS = {"user": items.user, "assistant": items.assistant, "system": items.system, "toolResult": items.tool_result,
          "taskState": items.task_state, "pinnedRule": items.pinned_rule}


def snake(name):
    return re.sub(r"[A-Z]", lambda m: "_" + m.group().lower(), name)


def make(case):
    return MAKERS[case["make"]](*case["args"], **{snake(k): v for k, v in case["options"].items()})


@pytest.mark.parametrize("case", CONSTRUCTORS["cases"], ids=lambda c: c["make"])
def test_each_constructor_gives_the_shared_item(case):
    assert make(case) == case["item"]


def test_every_constructed_item_is_one_the_kernel_plans_and_appends():
    # Named by case, so the plan's answer can be read back per case.
    made = [{"itemId": f"case-{n}", **make(case)} for n, case in enumerate(CONSTRUCTORS["cases"])]
    kernel = Kernel(MemoryStore(), clock=lambda: NOW)
    plan = kernel.plan_context({"sink": "model:test", "model": PLAN["model"], "items": made})
    placed = {e["itemId"]: {"partition": e["partition"]} for e in plan["context"]}
    placed |= {d["itemId"]: {"dropped": d["reason"]} for d in plan["dropped"]}
    assert [placed[i["itemId"]] for i in made] == [case["planned"] for case in CONSTRUCTORS["cases"]]
    # The same items as a session: the calls and the results that answer them pair up.
    receipt = kernel.append_events({"sessionId": "s1", "expectedHead": {"seq": 0}, "items": made})
    assert receipt["head"]["seq"] == len(made)


def test_every_maker_is_covered_and_refusals_are_typed():
    assert {c["make"] for c in CONSTRUCTORS["cases"]} == set(MAKERS)
    for case in CONSTRUCTORS["refused"]:
        with pytest.raises(KernelError) as refused:
            make(case)
        assert refused.value.code == case["code"] and refused.value.detail["field"] == case["field"]


def test_created_at_defaults_to_the_host_clock():
    before = datetime.now(timezone.utc) - timedelta(milliseconds=1)
    made = items.user("hi")["createdAt"]
    after = datetime.now(timezone.utc) + timedelta(milliseconds=1)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", made)
    assert before <= datetime.fromisoformat(made) <= after


def test_takes_now_is_every_request_schema_with_now():
    schemas = {}
    for path in (ROOT / "wit" / "schemas").glob("*.request.schema.json"):
        schemas[path.name.removesuffix(".request.schema.json")] = json.loads(path.read_text())
    assert set(schemas) == set(COMMANDS) | {"get-content", "put-content"}
    assert TAKES_NOW == {c for c, s in schemas.items() if "now" in s["properties"]}
    for command, (field, carried) in CARRIED.items():
        ref = schemas[command]["properties"][field]["$ref"].removeprefix("#/$defs/")
        assert set(schemas[command]["$defs"][ref]["properties"]) == set(schemas[carried]["properties"])


def test_the_shim_fills_version_and_now_and_keeps_what_is_given():
    ticks = []

    def clock():
        ticks.append(f"2026-06-01T12:00:{len(ticks):02d}.000Z")
        return ticks[-1]

    kernel = Kernel(MemoryStore(), clock=clock)
    request = {"sessionId": "s1", "expectedHead": {"seq": 0}, "items": [items.user("hello", created_at=NOW)]}
    kernel.append_events(request)
    assert request == {"sessionId": "s1", "expectedHead": {"seq": 0}, "items": [items.user("hello", created_at=NOW)]}
    assert kernel.read_events({"sessionId": "s1"})["events"][0]["item"]["content"] == "hello"
    assert ticks == ["2026-06-01T12:00:00.000Z"]  # read-events takes no `now`: none was asked
    # A given `now` is kept: the plan is as of then, whatever the clock says.
    given = kernel.plan_context({"sessionId": "s1", "sink": "model:test", "model": PLAN["model"], "now": NOW})
    assert given["now"] == NOW and len(ticks) == 1
    filled = kernel.plan_context({"sessionId": "s1", "sink": "model:test", "model": PLAN["model"]})
    assert filled["now"] == "2026-06-01T12:00:01Z"  # the kernel's form of the clock's instant
    # The plan a render request carries is filled too.
    rendered = kernel.render_context({"format": "anthropic-messages", "plan": {"sessionId": "s1", "sink": "model:test", "model": PLAN["model"]}})
    assert json.loads(rendered["bodyJson"]) == rendered["body"] and len(ticks) == 3
    # `call` sends what it is given, and the kernel names what is missing.
    with pytest.raises(KernelError) as missing:
        kernel.call("plan-context", {"sessionId": "s1", "sink": "model:test", "model": PLAN["model"]})
    assert missing.value.code == "invalid-request" and "missing field" in str(missing.value)
    # A version the kernel does not speak is the kernel's to refuse, not the shim's to overwrite.
    with pytest.raises(KernelError) as future:
        kernel.plan_context({"schemaVersion": 99, "sessionId": "s1", "sink": "model:test", "model": PLAN["model"]})  # type: ignore[typeddict-item]
    assert future.value.code == "unsupported-schema"


def test_a_request_that_is_not_an_object_is_a_typed_error():
    kernel = Kernel(MemoryStore())
    for bad in (["sessionId"], "not json", 7, None):
        with pytest.raises(KernelError) as refused:
            kernel.plan_context(bad)
        assert refused.value.code == "invalid-request"


def test_the_error_message_does_not_repeat_the_code():
    with pytest.raises(KernelError) as refused:
        Kernel(MemoryStore()).read_events({"sessionId": "s1", "limit": -1})
    assert refused.value.code == "invalid-request"
    assert not str(refused.value).startswith("invalid-request") and str(refused.value) == refused.value.message
    assert "code: invalid-request" in refused.value.__notes__


WRONG_ANSWERS = [
    (None, "answer"),
    ("A long session about words.", "answer"),
    ({"summary": "x", "usage": {"inputTokens": 1, "outputTokens": 1}}, "text"),
    ({"text": 42, "usage": {"inputTokens": 1, "outputTokens": 1}}, "text"),
    ({"text": "x"}, "usage"),
    ({"text": "x", "usage": [1, 1]}, "usage"),
]


@pytest.mark.parametrize("answer,field", WRONG_ANSWERS)
def test_a_provider_answer_of_the_wrong_shape_is_a_typed_error_and_leaves_the_operation_awaiting(seeded, answer, field):
    kernel = seeded()
    with pytest.raises(KernelError) as wrong:
        kernel.compact(compact_request("provider"), lambda _: answer)
    assert wrong.value.code == "invalid-request" and wrong.value.detail["field"] == field
    operation = wrong.value.detail["operationId"]
    # Nothing was settled: the operation still awaits, and a right answer commits it.
    done = kernel.continue_operation({"operationId": operation, "response": {"outcome": "success", "text": "Words.", "usage": {"inputTokens": 1, "outputTokens": 1}}})
    assert done["status"] == "committed"

    async def wrong_async(_):
        return answer

    with pytest.raises(KernelError) as wrong:
        asyncio.run(seeded().compact_async(compact_request("provider"), wrong_async))
    assert wrong.value.detail["field"] == field


def test_a_usage_with_unknown_fields_is_the_kernels_typed_error(seeded):
    with pytest.raises(KernelError) as wrong:
        seeded().compact(compact_request("provider"), lambda _: {"text": "x", "usage": {"inputTokens": 1, "outputTokens": 1, "cachedTokens": 1}})
    assert wrong.value.code == "invalid-request" and "cachedTokens" in str(wrong.value)


def test_an_async_compaction_takes_a_plain_provider_too(seeded):
    answer = {"text": "A long session about words.", "usage": {"inputTokens": 1, "outputTokens": 1}}
    assert asyncio.run(seeded().compact_async(compact_request("provider"), lambda _: answer))["status"] == "committed"


def test_null_is_filled_as_absent_is():
    kernel = Kernel(MemoryStore(), clock=lambda: "2026-06-01T12:00:07.000Z")
    plan = kernel.plan_context({"schemaVersion": None, "now": None, "sink": "model:test", "model": PLAN["model"]})  # type: ignore[typeddict-item]
    assert plan["now"] == "2026-06-01T12:00:07Z"


def test_an_option_given_as_none_takes_its_default_and_iterables_are_read_once():
    assert items.user("hi", scope=None, trust=None, sensitivity=None, priority=None, created_at=NOW) == items.user("hi", created_at=NOW)
    assert items.tool_result("c", "x", outcome=None, created_at=NOW)["toolResult"]["outcome"] == "success"
    call = {"callId": "c1", "name": "f", "arguments": "{}"}
    assert items.assistant(None, tool_calls=iter([call]), created_at=NOW)["toolCalls"] == [call]
    with pytest.raises(KernelError) as empty:
        items.assistant(None, tool_calls=iter([]))
    assert empty.value.detail["field"] == "toolCalls"
    assert items.user("hi", allowed_sinks=("model:a", "log"))["allowedSinks"] == ["model:a", "log"]
    with pytest.raises(KernelError) as one:
        items.user("hi", allowed_sinks="model:x")
    assert one.value.detail["field"] == "allowedSinks"


def test_a_value_json_cannot_carry_is_a_typed_error(seeded):
    from decimal import Decimal

    with pytest.raises(KernelError) as wrong:
        seeded().compact(compact_request("provider"), lambda _: {"text": "x", "usage": {"inputTokens": Decimal(1), "outputTokens": 1}})
    assert wrong.value.code == "invalid-request" and "Decimal" in str(wrong.value)
    with pytest.raises(KernelError) as bare:
        Kernel(MemoryStore()).call("put-content", {"now": NOW})
    assert bare.value.code == "invalid-request"


def test_each_command_is_logged_with_its_outcome_and_never_its_body(caplog):
    secret = "sk-live-4f9a-do-not-log"
    kernel = Kernel(MemoryStore(), clock=lambda: NOW)
    with caplog.at_level(logging.DEBUG, logger="ctxkernel_sdk"):
        kernel.append_events({"sessionId": "s1", "expectedHead": {"seq": 0}, "items": [items.user(f"my key is {secret}")]})
        with pytest.raises(KernelError):
            kernel.append_events({"sessionId": "s1", "expectedHead": {"seq": 0}, "items": [items.user(secret)]})
        kernel.plan_context(PLAN)
    records = [r for r in caplog.records if r.name == "ctxkernel_sdk"]
    assert [(r.command, r.outcome, r.levelno) for r in records] == [
        ("append-events", "ok", logging.DEBUG), ("append-events", "stale", logging.DEBUG), ("plan-context", "ok", logging.DEBUG)]
    assert all(r.duration_ms >= 0 for r in records)
    assert not any(secret in r.getMessage() or secret in json.dumps(r.__dict__, default=str) for r in records)


QUICK = """
from ctxkernel_sdk import ContextPlan, Kernel, MemoryStore, items

kernel = Kernel(MemoryStore())
kernel.append_events({"sessionId": "s1", "expectedHead": {"seq": 0}, "items": [items.user("Hi")]})
plan: ContextPlan = kernel.plan_context({"sessionId": "s1", "sink": "model:x",
    "model": {"profile": "x", "window": 8000, "reservedOutput": 500, "safetyMargin": 100}})
kept: int = len(plan["context"])
"""

MISTAKES = [
    ('"sessionId": "s1", "expectedHead"', '"sesionId": "s1", "expectedHead"', "typeddict-unknown-key"),
    ('"reservedOutput": 500', '"reservedOutput": "500"', "typeddict-item"),
    ('items.user("Hi")', 'items.user("Hi", trust="owner")', "arg-type"),
    ('items.user("Hi")', 'items.user("Hi", sensitivty="secret")', "call-arg"),
    ('len(plan["context"])', 'len(plan["contexts"])', "typeddict-item"),
]


def mypy(tmp_path, source):
    path = tmp_path / "caller.py"
    path.write_text(source)
    return subprocess.run([sys.executable, "-m", "mypy", "--strict", "--no-incremental", str(path)], capture_output=True, text=True)


def test_mypy_strict_passes_a_callers_code_and_catches_each_mistake(tmp_path):
    ok = mypy(tmp_path, QUICK)
    assert ok.returncode == 0, ok.stdout
    exec(compile(QUICK, "quick", "exec"), {})
    for right, wrong, code in MISTAKES:
        assert right in QUICK
        caught = mypy(tmp_path, QUICK.replace(right, wrong))
        assert caught.returncode == 1 and f"[{code}]" in caught.stdout, (wrong, caught.stdout)
