import asyncio
import json

import pytest

from conftest import NOW, PLAN, append_request, compact_request
from ctxkernel_sdk import COMMANDS, Kernel, KernelError, MemoryStore, ProviderOutcomeUnknown


def dump(store):
    return [(e.key, e.revision, e.value) for e in store.entries()]


def test_every_command_answers_through_the_component():
    kernel = Kernel(MemoryStore())
    assert [c for c in kernel.info()["commands"] if c in COMMANDS] == list(COMMANDS)
    assert kernel.append_events(append_request(0, 120))["head"]["seq"] == 120
    assert kernel.read_events({"schemaVersion": 1, "sessionId": "s1", "afterSeq": 100, "limit": 5})["events"][0]["seq"] == 101
    plan = kernel.plan_context(PLAN)
    assert plan["binding"]["sessionHead"]["seq"] == 120 and plan["dropped"] and plan["context"]
    compacted = kernel.compact_context(compact_request("local"))
    assert compacted["states"] == ["evaluating", "preparing", "verifying", "committing", "committed"]
    assert kernel.read_kernel_events()["events"][0]["type"] == "context.compaction.committed"
    put = kernel.put_content({"schemaVersion": 1, "allowedSinks": ["model:*"], "sensitivity": "internal", "now": NOW}, b"output")
    assert kernel.get_content({"schemaVersion": 1, "objectId": put["contentRef"]["objectId"], "sink": "model:x"}) == b"output"
    assert json.loads(kernel.call("info", '{"schemaVersion":1}'))["kernel"]["name"] == "ctxkernel"


def test_bad_input_is_a_typed_error_and_leaves_the_store_unchanged():
    store = MemoryStore()
    kernel = Kernel(store)
    kernel.append_events(append_request(0, 3))
    before = dump(store)
    cases = [
        ("plan-context", '{"schemaVersion": 1,', "invalid-request"),
        ("plan-context", {**PLAN, "model": {**PLAN["model"], "window": -1}}, "invalid-request"),
        ("plan-context", {**PLAN, "schemaVersion": 2}, "unsupported-schema"),
        ("append-events", append_request(0, 1), "stale"),
        ("continue-operation", {"schemaVersion": 1, "operationId": "op-nope", "now": NOW, "response": {"outcome": "cancelled"}}, "not-found"),
        ("no-such-command", "{}", "invalid-request"),
    ]
    for command, request, code in cases:
        with pytest.raises(KernelError) as raised:
            kernel.call(command, request)
        assert raised.value.code == code, command
    with pytest.raises(KernelError) as raised:
        kernel.get_content({"schemaVersion": 1, "objectId": "0" * 64, "sink": "x"})
    assert raised.value.code == "content-unavailable"
    with pytest.raises(KernelError) as raised:
        kernel.append_events(append_request(0, 1))
    assert raised.value.detail["currentHead"]["seq"] == 3
    assert dump(store) == before


def test_a_host_exception_mid_call_rolls_back_and_the_next_call_works():
    store = MemoryStore()
    kernel = Kernel(store)
    kernel.append_events(append_request(0, 1))
    before = dump(store)
    put = store.put
    calls = {"n": 0}

    def exploding(*args):
        calls["n"] += 1
        if calls["n"] == 3:
            raise RuntimeError("the host blew up")
        return put(*args)

    store.put = exploding
    with pytest.raises(RuntimeError):
        kernel.append_events(append_request(1, 4))
    assert dump(store) == before, "the two puts before the exception were rolled back"
    store.put = put
    assert kernel.append_events(append_request(1, 4))["head"]["seq"] == 5


def test_a_failing_store_is_a_storage_failure():
    from ctxkernel_sdk import StoreError

    store = MemoryStore()
    kernel = Kernel(store)
    kernel.append_events(append_request(0, 1))
    before = dump(store)
    get = store.get
    store.get = lambda key: (_ for _ in ()).throw(StoreError("database is locked"))
    with pytest.raises(KernelError) as raised:
        kernel.plan_context(PLAN)
    assert raised.value.code == "storage-failure"
    store.get = get
    assert dump(store) == before
    assert kernel.plan_context(PLAN)["binding"]["sessionHead"]["seq"] == 1


def test_provider_callables_drive_compaction(seeded):
    asked = {}

    def summarize(request):
        asked.update(request)
        return {"text": "A long session about words.", "usage": {"inputTokens": 100, "outputTokens": 7}}

    assert seeded().compact(compact_request("provider"), summarize)["status"] == "committed"
    assert asked["model"] == "summarizer" and asked["messages"][0]["role"] == "system"

    def failing(_):
        raise ConnectionError("HTTP 503")

    assert seeded().compact(compact_request("provider"), failing)["status"] == "degraded"

    async def lost(_):
        raise ProviderOutcomeUnknown("socket closed after send")

    kernel = seeded()
    unknown = asyncio.run(kernel.compact_async(compact_request("provider"), lost))
    assert unknown["status"] == "reconciliation-required"
    retry = kernel.reconcile({"schemaVersion": 1, "operationId": unknown["operationId"], "now": NOW, "resolution": "retry"})
    assert retry["status"] == "awaiting-provider" and retry["operationId"] != unknown["operationId"]

    async def answer(_):
        return {"text": "async summary", "usage": {"inputTokens": 1, "outputTokens": 1}}

    assert asyncio.run(seeded().compact_async(compact_request("provider"), answer))["status"] == "committed"


def describes(typed_dict, value):
    """Every key of `value` is declared, and every declared key it lacks is NotRequired."""
    declared = typed_dict.__annotations__
    missing = {k for k in declared if k not in value}
    return set(value) <= set(declared) and all("NotRequired" in str(declared[k]) for k in missing)


def test_generated_types_describe_the_real_responses(seeded):
    from ctxkernel_sdk.envelopes import compact_context_response_schema, context_plan_schema

    assert describes(context_plan_schema.ContextPlan, seeded().plan_context(PLAN))
    assert describes(compact_context_response_schema.CompactResponse, seeded().compact_context(compact_request("local")))
    assert not describes(context_plan_schema.ContextPlan, {"unexpected": 1})


def test_large_values_cross_the_boundary_in_bulk():
    # Through wasmtime-py's component API a store value over ~2.7 MB exhausted
    # its host-call fuel and trapped; the kernel's own limit is 16 MiB.
    store = MemoryStore()
    kernel = Kernel(store)
    request = append_request(0, 1)
    request["items"][0]["content"] = "x" * (3 << 20)
    kernel.append_events(request)
    assert max(len(e.value) for e in store.entries()) > 3 << 20
    assert len(kernel.read_events({"schemaVersion": 1, "sessionId": "s1"})["events"][0]["item"]["content"]) == 3 << 20
    content = bytes(range(256)) * (32 << 12)  # 8 MiB
    put = kernel.put_content({"schemaVersion": 1, "allowedSinks": ["model:*"], "sensitivity": "internal", "now": NOW}, content)
    assert kernel.get_content({"schemaVersion": 1, "objectId": put["contentRef"]["objectId"], "sink": "model:x"}) == content


def test_a_lone_surrogate_is_an_invalid_request():
    kernel = Kernel(MemoryStore())
    with pytest.raises(KernelError) as raised:
        kernel.call("info", '{"schemaVersion":1,"x":"\ud800"}')
    assert (raised.value.code, raised.value.message) == ("invalid-request", "the request is not valid Unicode: it holds a lone surrogate")
    # In an object, json.dumps escapes it; the kernel gives the same answer.
    for lone in ["\ud800", "\udc00", "a\ud800b"]:
        with pytest.raises(KernelError) as raised:
            kernel.read_events({"schemaVersion": 1, "sessionId": lone})
        assert (raised.value.code, raised.value.message) == ("invalid-request", "the request is not valid Unicode: it holds a lone surrogate")


def test_a_number_that_is_not_finite_is_refused():
    kernel = Kernel(MemoryStore())
    for value in [float("nan"), float("inf"), float("-inf")]:
        with pytest.raises(KernelError) as raised:
            kernel.read_events({"schemaVersion": 1, "sessionId": "s", "afterSeq": value})
        assert (raised.value.code, raised.value.message) == ("invalid-request", "the request holds a number that is not finite (NaN or Infinity), which JSON cannot carry")


def test_a_trap_is_one_fixed_internal_error_and_the_instance_is_replaced():
    store = MemoryStore()
    kernel = Kernel(store, max_memory_bytes=8 << 20)
    kernel.append_events(append_request(0, 1))
    before = dump(store)
    big = append_request(1, 40)
    for item in big["items"]:
        item["content"] = "y" * (512 << 10)
    with pytest.raises(KernelError) as raised:
        kernel.append_events(big)
    assert (raised.value.code, raised.value.message, raised.value.detail_json) == ("internal", "the kernel trapped; the call was rolled back", "{}")
    assert dump(store) == before
    assert kernel.append_events(append_request(1, 2))["head"]["seq"] == 3
