import json
import sqlite3
import subprocess
import sys
import textwrap

import pytest

from conftest import PLAN, append_request
from ctxkernel import Kernel, SqliteStore, StoreError

CHILD = textwrap.dedent(
    """
    import json, sys
    from ctxkernel import Kernel, KernelError, SqliteStore
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
