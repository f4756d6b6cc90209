"""The kernel: the one component's core module, run by wasmtime, over a
store this process supplies.

Every command runs inside one store transaction: committed when the kernel
answers, rolled back when it answers an error, traps, or the store raises. A
command that only reads takes no write lock.
"""

from __future__ import annotations

import json
from typing import Awaitable, Callable, Optional, Union

from wasmtime import Trap, WasmtimeError

from ._engine import Instance, runtime
from ._errors import KernelError
from ._provider import drive, drive_async
from ._stores import MemoryStore, Store, StoreError

#: The kernel's JSON commands, as named in the WIT.
COMMANDS = (
    "info",
    "plan-context",
    "append-events",
    "read-events",
    "compact-context",
    "continue-operation",
    "reconcile",
    "read-kernel-events",
    "propose-memory",
    "consolidate-memory",
    "decide-memory",
    "delete-memory",
    "purge-memory",
    "read-memory",
    "recall-memory",
    "resident-snapshot",
    "import-messages",
    "render-context",
    "validate-request",
    "verify-store",
)
#: Commands that only read: their transaction takes no write lock.
READ_ONLY = frozenset({"info", "read-events", "plan-context", "get-content", "read-kernel-events", "read-memory", "recall-memory", "resident-snapshot", "render-context", "validate-request", "verify-store"})
#: What every host answers when the kernel traps (the trap's own text differs per engine).
TRAPPED = "the kernel trapped; the call was rolled back"


def _text(request: Union[str, dict]) -> bytes:
    """A request as UTF-8: text as given, an object as JSON (NaN and Infinity
    refused, as every host does: json writes them as no JSON reader reads)."""
    try:
        text = request if isinstance(request, str) else json.dumps(request, allow_nan=False)
    except ValueError as e:
        if not str(e).startswith("Out of range float values"):
            raise
        raise KernelError("invalid-request", "the request holds a number that is not finite (NaN or Infinity), which JSON cannot carry") from e
    try:
        return text.encode()
    except UnicodeEncodeError as e:
        raise KernelError("invalid-request", "the request is not valid Unicode: it holds a lone surrogate") from e


class Kernel:
    """One kernel instance over one store.

    `max_memory_bytes` bounds the instance's linear memory: a call that needs
    more traps, and is rolled back like any trap. `component_sha256` names
    the component it runs (the packaged one unless `component` is a path)."""

    def __init__(self, store: Optional[Store] = None, *, component: Optional[str] = None, max_memory_bytes: Optional[int] = None) -> None:
        self.store: Store = store if store is not None else MemoryStore()
        self._engine, self._module, self.component_sha256 = runtime(component)
        self._max_memory = max_memory_bytes
        self._instance: Optional[Instance] = None

    def _transact(self, command: str, *args: bytes) -> bytes:
        if self._instance is None:
            self._instance = Instance(self._engine, self._module, self.store, self._max_memory)
        try:
            self.store.begin(command not in READ_ONLY)
        except StoreError as e:
            raise KernelError("storage-failure", f"cannot begin a transaction: {e}") from e
        try:
            ok, err = self._instance.call(command, *args)
        except BaseException as e:
            # A trap or a host exception: roll back, and give the next call a fresh instance.
            self._rollback()
            self._instance = None
            if isinstance(e, (Trap, WasmtimeError)):
                raise KernelError("internal", TRAPPED) from e
            raise
        if err is not None:
            self._rollback()
            raise KernelError(*err)
        try:
            self.store.commit()
        except StoreError as e:
            self._rollback()
            raise KernelError("storage-failure", f"commit failed: {e}") from e
        assert ok is not None
        return ok

    def _rollback(self) -> None:
        try:
            self.store.rollback()
        except StoreError:
            pass  # the transaction is gone either way

    def call(self, command: str, request: Union[str, dict], content: Optional[bytes] = None) -> str:
        """Runs one JSON command, or `put-content` with its `content`; returns
        the kernel's canonical JSON text verbatim. Text requests are sent as given."""
        if command == "put-content" and content is not None:
            return self._transact(command, _text(request), bytes(content)).decode()
        if command not in COMMANDS:
            raise KernelError("invalid-request", f"no command `{command}`")
        return self._transact(command, _text(request)).decode()

    def _json(self, command: str, request: Union[str, dict]) -> dict:
        return json.loads(self.call(command, request))

    def info(self) -> dict:
        return self._json("info", {"schemaVersion": 1})

    def plan_context(self, request: dict) -> dict:
        return self._json("plan-context", request)

    def append_events(self, request: dict) -> dict:
        return self._json("append-events", request)

    def read_events(self, request: dict) -> dict:
        return self._json("read-events", request)

    def compact_context(self, request: dict) -> dict:
        return self._json("compact-context", request)

    def continue_operation(self, request: dict) -> dict:
        return self._json("continue-operation", request)

    def reconcile(self, request: dict) -> dict:
        return self._json("reconcile", request)

    def read_kernel_events(self, request: Optional[dict] = None) -> dict:
        return self._json("read-kernel-events", request or {"schemaVersion": 1})

    def propose_memory(self, request: dict) -> dict:
        return self._json("propose-memory", request)

    def consolidate_memory(self, request: dict) -> dict:
        return self._json("consolidate-memory", request)

    def decide_memory(self, request: dict) -> dict:
        return self._json("decide-memory", request)

    def delete_memory(self, request: dict) -> dict:
        return self._json("delete-memory", request)

    def purge_memory(self, request: dict) -> dict:
        return self._json("purge-memory", request)

    def read_memory(self, request: dict) -> dict:
        return self._json("read-memory", request)

    def recall_memory(self, request: dict) -> dict:
        return self._json("recall-memory", request)

    def resident_snapshot(self, request: dict) -> dict:
        return self._json("resident-snapshot", request)

    def import_messages(self, request: dict) -> dict:
        return self._json("import-messages", request)

    def render_context(self, request: dict) -> dict:
        """Plans and renders; `bodyJson` is the body's exact text, to send as it is (`body` is it parsed)."""
        text = self.call("render-context", request)
        response = json.loads(text)
        response["bodyJson"] = _member(text, "body")
        return response

    def validate_request(self, request: dict) -> dict:
        return self._json("validate-request", request)

    def verify_store(self, request: Optional[dict] = None) -> dict:
        """Reads every memory entry against its record and names each problem by key; changes nothing."""
        return self._json("verify-store", request if request is not None else {"schemaVersion": 1})

    def put_content(self, request: Union[str, dict], content: bytes) -> dict:
        """Stores `content` by its sha256; returns `{contentRef, created}`."""
        return json.loads(self.call("put-content", request, content))

    def get_content(self, request: Union[str, dict]) -> bytes:
        """The stored bytes, verified against their digest by the kernel."""
        return self._transact("get-content", _text(request))

    def compact(self, request: dict, provider: Optional[Callable[[dict], dict]] = None, clock: Optional[Callable[[], str]] = None) -> dict:
        """Compacts, calling `provider(providerRequest)` whenever the kernel asks
        for a summary. It returns `{"text": ..., "usage": {...}}`; raising is a
        failed call, `ProviderOutcomeUnknown` an unknown outcome (reconcile it),
        `ProviderCancelled` gives up."""
        return drive(self, self.compact_context(request), provider, clock)

    async def compact_async(self, request: dict, provider: Callable[[dict], Awaitable[dict]], clock: Optional[Callable[[], str]] = None) -> dict:
        """`compact` with an async provider."""
        return await drive_async(self, self.compact_context(request), provider, clock)

    def consolidate(self, request: dict, provider: Optional[Callable[[dict], dict]] = None, clock: Optional[Callable[[], str]] = None) -> dict:
        """Extracts candidate memories from a session, calling `provider` like `compact`."""
        return drive(self, self.consolidate_memory(request), provider, clock)

    async def consolidate_async(self, request: dict, provider: Callable[[dict], Awaitable[dict]], clock: Optional[Callable[[], str]] = None) -> dict:
        """`consolidate` with an async provider."""
        return await drive_async(self, self.consolidate_memory(request), provider, clock)


def _member(text: str, name: str) -> str:
    """The exact text of one member of the kernel's JSON object text (canonical: no whitespace)."""
    decoder = json.JSONDecoder()
    at = 1
    while text[at] != "}":
        key, at = decoder.raw_decode(text, at)
        _, end = decoder.raw_decode(text, at + 1)
        if key == name:
            return text[at + 1 : end]
        at = end + (text[end] == ",")
    raise KeyError(name)
