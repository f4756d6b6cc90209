import json
import sqlite3
import subprocess
import sys
import textwrap
import time

import pytest

from conftest import PLAN, append_request
from ctxkernel_sdk import Kernel, KernelError, SqliteStore, StoreError

CHILD = textwrap.dedent(
    """
    import json, sys
    from ctxkernel_sdk import Kernel, KernelError, SqliteStore
    path, start = sys.argv[1], int(sys.argv[2])
    item = {"schemaVersion": 1, "itemId": f"child-{start}-{__import__('os').getpid()}", "kind": "message", "role": "user",
            "scope": "session", "sourceRef": {"kind": "session", "id": "s1", "seq": start + 1}, "provenance": {"origin": "user"},
            "trust": "user", "sensitivity": "internal", "allowedSinks": ["model:*"], "priority": 0, "pinned": False,
            "createdAt": "2026-06-01T12:00:00Z", "content": "from another process"}
    try:
        out = Kernel(SqliteStore(path)).append_events({"schemaVersion": 1, "sessionId": "s1", "expectedHead": {"seq": start},
                                                       "items": [item], "now": "2026-06-01T12:00:00Z"})
        print(json.dumps(out))
    except KernelError as e:
        print(json.dumps({"code": e.code, "detail": e.detail}))
        sys.exit(3)
    """
)


def test_two_processes_share_one_store_file(tmp_path):
    path = str(tmp_path / "store.sqlite")
    kernel = Kernel(SqliteStore(path))
    kernel.append_events(append_request(0, 2))
    run = lambda start: subprocess.run([sys.executable, "-c", CHILD, path, str(start)], capture_output=True, text=True)  # noqa: E731
    first = run(2)
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout)["head"]["seq"] == 3
    assert kernel.plan_context(PLAN)["binding"]["sessionHead"]["seq"] == 3
    lost = run(2)
    assert lost.returncode == 3, lost.stderr
    assert json.loads(lost.stdout) == {"code": "stale", "detail": json.loads(lost.stdout)["detail"]}
    assert json.loads(lost.stdout)["detail"]["currentHead"]["seq"] == 3
    assert len(kernel.read_events({"schemaVersion": 1, "sessionId": "s1"})["events"]) == 3
    assert kernel.info()["store"]["revision"] == 2


def test_foreign_files_are_refused(tmp_path):
    other = tmp_path / "other.sqlite"
    sqlite3.connect(other).execute("CREATE TABLE invoices (id INTEGER)")
    with pytest.raises(StoreError, match="not a ctxkernel store"):
        SqliteStore(str(other))
    garbage = tmp_path / "garbage.sqlite"
    garbage.write_bytes(b"\x42" * 8192)
    with pytest.raises(StoreError):
        SqliteStore(str(garbage))


def test_readers_never_wait_on_a_writer_and_a_busy_writer_gets_a_typed_error(tmp_path):
    path = str(tmp_path / "store.sqlite")
    kernel = Kernel(SqliteStore(path, busy_timeout_ms=300))
    kernel.append_events(append_request(0, 2))
    # Another connection holds the write lock, as a long compaction would.
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")
    writer.execute("UPDATE ctxk_entries SET revision = revision + 1")
    # The lock is held throughout: a read that waited for it would fail busy.
    assert kernel.plan_context(PLAN)["binding"]["sessionHead"]["seq"] == 2
    assert len(kernel.read_events({"schemaVersion": 1, "sessionId": "s1"})["events"]) == 2
    assert kernel.info()["store"]["revision"] == 1, "readers see the last commit, not the open transaction"
    started = time.monotonic()
    with pytest.raises(KernelError) as raised:
        kernel.append_events(append_request(2, 1))
    assert time.monotonic() - started >= 0.29
    assert raised.value.code == "storage-failure"
    assert raised.value.message == "cannot begin a transaction: the store is busy: another connection held its write lock for more than 300 ms"
    writer.execute("ROLLBACK")
    assert kernel.append_events(append_request(2, 1))["head"]["seq"] == 3


@pytest.mark.parametrize("seed", range(4))
def test_the_memory_store_scans_in_byte_order_from_any_cursor(seed):
    import random

    from ctxkernel_sdk import MemoryStore

    rng = random.Random(seed)
    # Around the one-byte/two-byte boundary, the BMP's top, past it, and the key separators.
    alphabet = ["a", "b", "/", "-", "%", "\x7f", "\x80", "é", "\ue000", "\uffff", "\U0001f600"]
    word = lambda: "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 4)))  # noqa: E731
    store, model = MemoryStore(), {}
    for _ in range(2000):
        key = word()
        if rng.random() < 0.7:
            store.put(key, key.encode(), None)
            model[key] = key.encode()
        else:
            store.remove(key, None)
            model.pop(key, None)
    ordered = sorted(model, key=str.encode)
    assert [e.key for e in store.entries()] == ordered
    for _ in range(400):
        prefix, after, limit = word()[:2], word(), rng.randint(0, 12)
        expected = [k for k in ordered if k.startswith(prefix) and k.encode() > after.encode()][:limit]
        assert [(e.key, e.value) for e in store.scan(prefix, after, limit)] == [(k, model[k]) for k in expected]
