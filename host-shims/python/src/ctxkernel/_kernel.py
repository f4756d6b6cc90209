"""The kernel: the one component, run by wasmtime, over a store this process supplies.

Every command runs inside one store transaction: committed when the kernel
answers, rolled back when it answers an error, traps, or the store raises.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from functools import lru_cache
from importlib.resources import files
from typing import Any, Awaitable, Callable, Optional, Union

from wasmtime import Engine, Store as WasmStore, WasiConfig, WasmtimeError
from wasmtime.component import Component, Linker, Record, Variant

from ._stores import Entry, MemoryStore, Store, StoreConflict, StoreError

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
)
_EXPORTS = COMMANDS + ("put-content", "get-content")
_INTERFACE = "ctxkernel:kernel/kernel@0.1.0"


class KernelError(Exception):
    """The one error every command raises: the kernel's code, message and detail."""

    def __init__(self, code: str, message: str, detail: Optional[dict] = None) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.detail = detail or {}


class ProviderOutcomeUnknown(Exception):
    """Raise from a provider callback when nobody knows whether the call happened."""


class ProviderCancelled(Exception):
    """Raise from a provider callback to give up on the operation."""


@lru_cache(maxsize=None)
def _runtime(path: Optional[str]) -> tuple[Engine, Component]:
    engine = Engine()
    wasm = open(path, "rb").read() if path else files("ctxkernel").joinpath("ctxkernel.wasm").read_bytes()
    return engine, Component(engine, wasm)


def _entry(entry: Entry) -> Record:
    record = Record()
    record.key = entry.key
    record.revision = entry.revision
    record.value = entry.value
    return record


class Kernel:
    """One kernel instance over one store."""

    def __init__(self, store: Optional[Store] = None, *, component: Optional[str] = None) -> None:
        self.store: Store = store if store is not None else MemoryStore()
        self._engine, self._component = _runtime(component)
        self._instance: Optional[tuple[WasmStore, dict]] = None

    # The storage port, as the component imports it. `get` and `scan` cannot
    # return an error value through wasmtime-py's untagged result mapping, so
    # a failing store raises and the call is rolled back.
    def _get(self, _: Any, key: str) -> Optional[Record]:
        entry = self.store.get(key)
        return _entry(entry) if entry else None

    def _scan(self, _: Any, prefix: str, start_after: str, limit: int) -> list:
        return [_entry(e) for e in self.store.scan(prefix, start_after, limit)]

    def _put(self, _: Any, key: str, value: bytes, expected: Optional[int]) -> Variant:
        try:
            return Variant("ok", self.store.put(key, value, expected))
        except StoreConflict as e:
            return Variant("err", e.current)
        except StoreError as e:
            return Variant("err", str(e))

    def _remove(self, _: Any, key: str, expected: Optional[int]) -> Union[None, int, str]:
        try:
            self.store.remove(key, expected)
            return None
        except StoreConflict as e:
            return e.current
        except StoreError as e:
            return str(e)

    def _instantiate(self) -> tuple[WasmStore, dict]:
        if self._instance is None:
            linker = Linker(self._engine)
            linker.add_wasip2()
            with linker.root() as root:
                with root.add_instance("ctxkernel:kernel/store@0.1.0") as port:
                    port.add_func("get", self._get)
                    port.add_func("scan", self._scan)
                    port.add_func("put", self._put)
                    port.add_func("remove", self._remove)
            wasm = WasmStore(self._engine)
            # No environment, arguments or files: the kernel gets nothing but its store.
            wasi = WasiConfig()
            wasi.inherit_stderr()
            wasm.set_wasi(wasi)
            instance = linker.instantiate(wasm, self._component)
            interface = instance.get_export_index(wasm, _INTERFACE)
            funcs = {name: instance.get_func(wasm, instance.get_export_index(wasm, name, interface)) for name in _EXPORTS}
            self._instance = (wasm, funcs)
        return self._instance

    def _transact(self, export: str, *args: Any) -> Any:
        wasm, funcs = self._instantiate()
        try:
            self.store.begin()
        except StoreError as e:
            raise KernelError("storage-failure", f"cannot begin a transaction: {e}") from e
        func = funcs[export]
        try:
            result = func(wasm, *args)
            func.post_return(wasm)
        except BaseException as e:
            # A trap or a host exception: roll back, and give the next call a fresh instance.
            self._rollback()
            self._instance = None
            if isinstance(e, StoreError):
                raise KernelError("storage-failure", str(e)) from e
            if isinstance(e, WasmtimeError):
                raise KernelError("internal", f"the kernel trapped; nothing was written: {e}") from e
            raise
        if isinstance(result, Record):
            self._rollback()
            raise KernelError(result.code, result.message, json.loads(result.detail or "{}"))
        try:
            self.store.commit()
        except StoreError as e:
            self._rollback()
            raise KernelError("storage-failure", f"commit failed: {e}") from e
        return result

    def _rollback(self) -> None:
        try:
            self.store.rollback()
        except StoreError:
            pass  # the transaction is gone either way

    def call(self, command: str, request: Union[str, dict]) -> str:
        """Runs one JSON command; returns the kernel's canonical JSON text."""
        if command not in COMMANDS:
            raise KernelError("invalid-request", f"no command `{command}`")
        text = request if isinstance(request, str) else json.dumps(request)
        return self._transact(command, text)

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

    def put_content(self, request: dict, content: bytes) -> dict:
        """Stores `content` by its sha256; returns `{contentRef, created}`."""
        return json.loads(self._transact("put-content", json.dumps(request), bytes(content)))

    def get_content(self, request: dict) -> bytes:
        """The stored bytes, verified against their digest by the kernel."""
        return self._transact("get-content", json.dumps(request))

    def compact(self, request: dict, provider: Optional[Callable[[dict], dict]] = None, clock: Optional[Callable[[], str]] = None) -> dict:
        """Compacts, calling `provider(providerRequest)` whenever the kernel asks
        for a summary. It returns `{"text": ..., "usage": {...}}`; raising is a
        failed call, `ProviderOutcomeUnknown` an unknown outcome (reconcile it),
        `ProviderCancelled` gives up."""
        return self._drive(self.compact_context(request), provider, clock)

    async def compact_async(self, request: dict, provider: Callable[[dict], Awaitable[dict]], clock: Optional[Callable[[], str]] = None) -> dict:
        """`compact` with an async provider."""
        return await self._drive_async(self.compact_context(request), provider, clock)

    def consolidate(self, request: dict, provider: Optional[Callable[[dict], dict]] = None, clock: Optional[Callable[[], str]] = None) -> dict:
        """Extracts candidate memories from a session, calling `provider` like `compact`."""
        return self._drive(self.consolidate_memory(request), provider, clock)

    async def consolidate_async(self, request: dict, provider: Callable[[dict], Awaitable[dict]], clock: Optional[Callable[[], str]] = None) -> dict:
        """`consolidate` with an async provider."""
        return await self._drive_async(self.consolidate_memory(request), provider, clock)

    def _drive(self, receipt: dict, provider: Optional[Callable[[dict], dict]], clock: Optional[Callable[[], str]]) -> dict:
        while receipt["status"] == "awaiting-provider" and provider is not None:
            try:
                answer, error = provider(receipt["providerRequest"]), None
            except Exception as e:  # handed to the kernel as the call's outcome
                answer, error = None, e
            receipt = self._settle(receipt, answer, error, clock)
        return receipt

    async def _drive_async(self, receipt: dict, provider: Callable[[dict], Awaitable[dict]], clock: Optional[Callable[[], str]]) -> dict:
        while receipt["status"] == "awaiting-provider":
            try:
                answer, error = await provider(receipt["providerRequest"]), None
            except Exception as e:
                answer, error = None, e
            receipt = self._settle(receipt, answer, error, clock)
        return receipt

    def _settle(self, receipt: dict, answer: Optional[dict], error: Optional[Exception], clock: Optional[Callable[[], str]]) -> dict:
        if error is None:
            response = {"outcome": "success", "text": answer["text"], "usage": answer["usage"]}
        elif isinstance(error, ProviderOutcomeUnknown):
            response = {"outcome": "unknown", "reason": str(error)}
        elif isinstance(error, ProviderCancelled):
            response = {"outcome": "cancelled", "reason": str(error)}
        else:
            response = {"outcome": "failed", "error": str(error)}
        now = clock() if clock else datetime.now(timezone.utc).isoformat().replace("+00:00", "Z")
        return self.continue_operation(
            {"schemaVersion": 1, "operationId": receipt["operationId"], "now": now, "response": response}
        )
