import pytest

from conftest import NOW, item
from ctxkernel_sdk import Kernel, KernelError, MemoryStore

PROJECT = {"scope": "project", "scopeId": "web"}
ADMIN = {"kind": "management", "actor": "lead"}


def said(kernel, seq, text):
    kernel.append_events({"schemaVersion": 1, "sessionId": "s1", "expectedHead": {"seq": seq - 1}, "items": [item(seq, "user", text)], "now": NOW})


def candidate(content, seq=1):
    return {**PROJECT, "category": "preference", "key": "web.package-manager", "content": content, "confidence": 0.7,
            "importance": 0.6, "provenance": {"origin": "model"}, "evidenceRefs": [{"kind": "session", "id": "s1", "seq": seq}]}


def dump(store):
    return [(e.key, e.revision, e.value) for e in store.entries()]


def test_the_memory_lifecycle_through_the_component():
    store = MemoryStore()
    kernel = Kernel(store)
    said(kernel, 1, "remember: we use yarn for the web app")

    def recall(query):
        return kernel.recall_memory({"schemaVersion": 1, "now": NOW, "query": query, "scopes": [PROJECT], "sink": "model:test"})

    (proposed,) = kernel.propose_memory({"schemaVersion": 1, "now": NOW, "candidates": [candidate("we use yarn for the web app")]})["receipts"]
    assert proposed["memory"]["state"] == "candidate"
    assert recall("which package manager")["memories"] == [], "candidates are never recalled"
    first = proposed["memory"]["memoryId"]
    kernel.decide_memory({"schemaVersion": 1, "now": NOW, "memoryId": first, "action": "activate", "authority": ADMIN, **PROJECT})
    said(kernel, 2, "correction: we use pnpm for the web app now")
    (moved,) = kernel.propose_memory({"schemaVersion": 1, "now": NOW, "authority": {"kind": "user-explicit", "sessionId": "s1"},
                                      "candidates": [candidate("we use pnpm for the web app", seq=2)]})["receipts"]
    assert moved["superseded"] == [first]
    found = recall("which package manager does the web app use")["memories"]
    assert found[0]["content"] == "we use pnpm for the web app"
    assert found[0]["history"][0]["content"] == "we use yarn for the web app"
    # An ungrounded user claim is refused and changes nothing.
    before = dump(store)
    with pytest.raises(KernelError) as refused:
        kernel.propose_memory({"schemaVersion": 1, "now": NOW, "authority": {"kind": "user-explicit", "sessionId": "s1"},
                               "candidates": [candidate("we use npm for the web app", seq=2)]})
    assert refused.value.code == "scope-denied"
    assert dump(store) == before
    deletion = kernel.delete_memory({"schemaVersion": 1, "now": NOW, "requestId": "forget-pm", "subject": "team-web", **PROJECT,
                                     "selector": {"key": "web.package-manager"}, "authority": ADMIN, "fence": 1, "replicas": ["laptop"]})
    assert (deletion["matched"], deletion["status"]) == (2, "partial")
    assert recall("package manager")["memories"] == []
    settled = kernel.reconcile({"schemaVersion": 1, "now": NOW, "operationId": deletion["deletionId"], "replicas": [{"replica": "laptop", "deleted": True}]})
    assert settled["status"] == "complete"


def test_generated_memory_types_describe_the_real_responses():
    from ctxkernel_sdk.envelopes import recall_memory_response_schema
    from test_kernel import describes

    kernel = Kernel(MemoryStore())
    said(kernel, 1, "we use pnpm")
    (receipt,) = kernel.propose_memory({"schemaVersion": 1, "now": NOW, "candidates": [candidate("we use pnpm")]})["receipts"]
    kernel.decide_memory({"schemaVersion": 1, "now": NOW, "memoryId": receipt["memory"]["memoryId"], "action": "activate", "authority": ADMIN, **PROJECT})
    recalled = kernel.recall_memory({"schemaVersion": 1, "now": NOW, "query": "pnpm", "scopes": [PROJECT], "sink": "model:test"})
    assert recalled["memories"]
    assert describes(recall_memory_response_schema.RecallResponse, recalled)


def test_consolidation_drives_the_provider_loop_and_degrades_to_the_rules():
    import json as _json

    kernel = Kernel(MemoryStore())
    said(kernel, 1, "Please remember that staging runs in Frankfurt. Why is CI red?")
    request = {"schemaVersion": 1, "sessionId": "s1", "now": NOW, "strategy": "provider", "provider": {"model": "extractor", "maxTokens": 300}}

    def extractor(provider_request):
        assert provider_request["model"] == "extractor"
        memories = [{"seq": 1, "category": "fact", "content": "staging runs in Frankfurt"}]
        return {"text": _json.dumps({"memories": memories}), "usage": {"inputTokens": 40, "outputTokens": 12}}

    done = kernel.consolidate(request, extractor)
    assert done["status"] == "proposed"
    assert [(r["memory"]["content"], r["memory"]["state"]) for r in done["receipts"]] == [("staging runs in Frankfurt", "candidate")]

    def down(_):
        raise RuntimeError("HTTP 503")

    degraded = kernel.consolidate({**request, "provider": {"model": "other", "maxTokens": 300}}, down)
    assert degraded["status"] == "degraded"
    assert degraded["receipts"][0]["merged"] is True


def test_verify_store_names_a_link_left_to_nothing_and_changes_nothing():
    store = MemoryStore()
    kernel = Kernel(store)
    assert kernel.verify_store()["ok"] is True
    # What a partial restore leaves: a scope link whose record is not there.
    store.put("mem/scope/project/web/mem-ghost", b'{"memoryId":"mem-ghost"}', None)
    before = dump(store)
    report = kernel.verify_store()
    assert (report["ok"], report["problemCount"]) == (False, 1)
    assert [(p["kind"], p["key"], p["memoryId"]) for p in report["problems"]] == [("dangling-link", "mem/scope/project/web/mem-ghost", "mem-ghost")]
    assert dump(store) == before
