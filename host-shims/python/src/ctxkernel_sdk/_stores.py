"""Stores implementing the kernel's storage port.

The kernel owns every key and byte; a store keeps per-key revisions,
compare-and-swap, bytewise key order, and one transaction per kernel call.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Any, Optional, Protocol

from sortedcontainers import SortedDict


@dataclass(frozen=True)
class Entry:
    key: str
    revision: int
    value: bytes


class StoreConflict(Exception):
    """A write whose expected revision did not match; carries the current one (0: absent)."""

    def __init__(self, current: int) -> None:
        super().__init__(f"revision conflict (current {current})")
        self.current = current


class StoreError(Exception):
    """A store that failed as stores do (busy, full, I/O): the kernel reports `storage-failure`."""


class Store(Protocol):
    """The storage port. `scan` returns the keys after `start_after` that start
    with `prefix`, in bytewise order: `limit` of them, or fewer only when no
    more follow (the kernel reads a short page as the end). `expected`: None
    writes unconditionally, 0 requires the key to be absent, r requires its
    revision to be r. `begin(write)` opens a call's transaction; `write` is
    False for a command that only reads."""

    def get(self, key: str) -> Optional[Entry]: ...
    def scan(self, prefix: str, start_after: str, limit: int) -> list[Entry]: ...
    def put(self, key: str, value: bytes, expected: Optional[int]) -> int: ...
    def remove(self, key: str, expected: Optional[int]) -> None: ...
    def begin(self, write: bool) -> None: ...
    def commit(self) -> None: ...
    def rollback(self) -> None: ...


def _check(current: int, expected: Optional[int]) -> None:
    if expected is not None and expected != current:
        raise StoreConflict(current)


class MemoryStore:
    """Process memory; for tests and throwaway sessions.

    Kept sorted (str order is code point order, which is UTF-8 byte order),
    so a scan reads only the page it returns.
    """

    def __init__(self) -> None:
        self._entries: SortedDict[str, tuple[int, bytes]] = SortedDict()
        self._undo: Optional[dict[str, Optional[tuple[int, bytes]]]] = None

    def get(self, key: str) -> Optional[Entry]:
        found = self._entries.get(key)
        return Entry(key, found[0], found[1]) if found else None

    def scan(self, prefix: str, start_after: str, limit: int) -> list[Entry]:
        # From the prefix itself when the cursor is before it, else just past the cursor.
        start, inclusive = (prefix, True) if start_after < prefix else (start_after, False)
        out: list[Entry] = []
        for key in self._entries.irange(start, inclusive=(inclusive, True)):
            if len(out) >= limit or not key.startswith(prefix):
                break
            out.append(Entry(key, *self._entries[key]))
        return out

    def put(self, key: str, value: bytes, expected: Optional[int]) -> int:
        current = self._entries.get(key, (0, b""))[0]
        _check(current, expected)
        self._touch(key)
        self._entries[key] = (current + 1, bytes(value))
        return current + 1

    def remove(self, key: str, expected: Optional[int]) -> None:
        _check(self._entries.get(key, (0, b""))[0], expected)
        self._touch(key)
        self._entries.pop(key, None)

    def begin(self, write: bool = True) -> None:
        if self._undo is not None:
            raise StoreError("a transaction is already open")
        self._undo = {}

    def commit(self) -> None:
        self._undo = None

    def rollback(self) -> None:
        for key, before in (self._undo or {}).items():
            if before is None:
                self._entries.pop(key, None)
            else:
                self._entries[key] = before
        self._undo = None

    def entries(self) -> list[Entry]:
        """Every entry in key order (for dumps and tests)."""
        return [Entry(k, *self._entries[k]) for k in self._entries]

    def _touch(self, key: str) -> None:
        if self._undo is not None and key not in self._undo:
            self._undo[key] = self._entries.get(key)


APPLICATION_ID = 0x63746B31  # "ctk1"
LAYOUT_VERSION = 1


#: How long a call waits for another connection's write lock before `storage-failure`.
BUSY_TIMEOUT_MS = 5000


class SqliteStore:
    """The embedded default: one SQLite file with the same layout in every
    host, so a store written here opens in Node, the JVM and `ctxk`.

    A command that writes takes the write lock when it begins, waiting up to
    `busy_timeout_ms` for another connection to release it; one that only
    reads takes none and reads a snapshot (WAL), so it never waits on a writer."""

    def __init__(self, path: str, busy_timeout_ms: int = BUSY_TIMEOUT_MS) -> None:
        self._busy_timeout_ms = busy_timeout_ms
        try:
            db = sqlite3.connect(path, isolation_level=None, timeout=busy_timeout_ms / 1000, check_same_thread=False)
            app = db.execute("PRAGMA application_id").fetchone()[0]
            layout = db.execute("PRAGMA user_version").fetchone()[0]
            tables = db.execute("SELECT count(*) FROM sqlite_schema").fetchone()[0]
        except sqlite3.Error as e:
            raise StoreError(f"cannot open {path}: {e}") from e
        if app != APPLICATION_ID and (app != 0 or tables != 0):
            db.close()
            raise StoreError(f"this SQLite file is not a ctxkernel store (application_id {app:#x})")
        if layout > LAYOUT_VERSION:
            db.close()
            raise StoreError(f"this store has layout {layout}; this host reads layout {LAYOUT_VERSION}")
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        if app == 0:
            db.executescript(
                f"""BEGIN IMMEDIATE;
                CREATE TABLE IF NOT EXISTS ctxk_entries (
                  key TEXT PRIMARY KEY NOT NULL,
                  revision INTEGER NOT NULL,
                  value BLOB NOT NULL
                ) WITHOUT ROWID;
                PRAGMA application_id = {APPLICATION_ID};
                PRAGMA user_version = {LAYOUT_VERSION};
                COMMIT;"""
            )
        self._db = db

    def _run(self, sql: str, params: tuple[Any, ...] = ()) -> sqlite3.Cursor:
        try:
            return self._db.execute(sql, params)
        except sqlite3.Error as e:
            if getattr(e, "sqlite_errorcode", 0) & 0xFF == sqlite3.SQLITE_BUSY:
                raise StoreError(_busy(self._busy_timeout_ms)) from e
            raise StoreError(str(e)) from e

    def _revision(self, key: str) -> int:
        row = self._run("SELECT revision FROM ctxk_entries WHERE key = ?", (key,)).fetchone()
        return row[0] if row else 0

    def get(self, key: str) -> Optional[Entry]:
        row = self._run("SELECT revision, value FROM ctxk_entries WHERE key = ?", (key,)).fetchone()
        return Entry(key, row[0], bytes(row[1])) if row else None

    def scan(self, prefix: str, start_after: str, limit: int) -> list[Entry]:
        # One lower bound per query, so SQLite seeks to it (with two it may
        # seek to the prefix and step over every earlier page again).
        if start_after < prefix:
            sql, start = "SELECT key, revision, value FROM ctxk_entries WHERE key >= ? AND key < ? ORDER BY key LIMIT ?", prefix
        else:
            sql, start = "SELECT key, revision, value FROM ctxk_entries WHERE key > ? AND key < ? ORDER BY key LIMIT ?", start_after
        rows = self._run(sql, (start, _prefix_end(prefix), limit)).fetchall()
        return [Entry(k, r, bytes(v)) for (k, r, v) in rows if k.startswith(prefix)]

    def put(self, key: str, value: bytes, expected: Optional[int]) -> int:
        current = self._revision(key)
        _check(current, expected)
        self._run(
            "INSERT INTO ctxk_entries (key, revision, value) VALUES (?, ?, ?) "
            "ON CONFLICT (key) DO UPDATE SET revision = excluded.revision, value = excluded.value",
            (key, current + 1, bytes(value)),
        )
        return current + 1

    def remove(self, key: str, expected: Optional[int]) -> None:
        _check(self._revision(key), expected)
        self._run("DELETE FROM ctxk_entries WHERE key = ?", (key,))

    def begin(self, write: bool = True) -> None:
        self._run("BEGIN IMMEDIATE" if write else "BEGIN DEFERRED")

    def commit(self) -> None:
        self._run("COMMIT")

    def rollback(self) -> None:
        if self._db.in_transaction:
            self._run("ROLLBACK")

    def close(self) -> None:
        self._db.close()


def _busy(timeout_ms: int) -> str:
    """The one message every host's SQLite store gives for a lock it could not get."""
    return f"the store is busy: another connection held its write lock for more than {timeout_ms} ms"


def _prefix_end(prefix: str) -> str:
    """The smallest ASCII string above every key starting with `prefix`."""
    for i in range(len(prefix) - 1, -1, -1):
        if ord(prefix[i]) < 0x7F:
            return prefix[:i] + chr(ord(prefix[i]) + 1)
    return "\x7f"
