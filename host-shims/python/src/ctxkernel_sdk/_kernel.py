"""The kernel: the one component's core module, run by wasmtime, over a
store this process supplies.

Every command runs inside one store transaction: committed when the kernel
answers, rolled back when it answers an error, traps, or the store raises. A
command that only reads takes no write lock.

The typed methods fill what a caller leaves out of a request: its
`schemaVersion`, and `now` from the kernel's clock (the host's, unless one is
given), in the request and in the plan a render request carries. `call`
sends a request as it is given. Each command is logged to the
`ctxkernel_sdk` logger: its name, duration and outcome code, never a body.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any, Mapping, Optional, Union, cast

from wasmtime import Trap, WasmtimeError

from ._clock import Clock, utc_now
from ._engine import Instance, runtime
from ._errors import KernelError
from ._provider import AsyncProvider, Provider, drive, drive_async
from ._stores import MemoryStore, Store, StoreError
from .envelopes.append_events_request_schema import AppendEventsRequest
from .envelopes.append_events_response_schema import AppendEventsResponse
from .envelopes.compact_context_request_schema import CompactRequest
from .envelopes.compact_context_response_schema import CompactResponse
from .envelopes.consolidate_memory_request_schema import ConsolidateRequest
from .envelopes.consolidate_memory_response_schema import ConsolidateResponse
from .envelopes.context_plan_schema import ContextPlan
from .envelopes.continue_operation_request_schema import ContinueRequest
from .envelopes.decide_memory_request_schema import DecideRequest
from .envelopes.delete_memory_request_schema import DeleteRequest
from .envelopes.deletion_receipt_schema import DeletionReceipt
from .envelopes.get_content_request_schema import GetContentRequest
from .envelopes.import_messages_request_schema import ImportRequest
from .envelopes.import_messages_response_schema import ImportResponse
from .envelopes.info_response_schema import InfoResponse
from .envelopes.memory_receipt_schema import MemoryReceipt
from .envelopes.plan_context_request_schema import PlanRequest
from .envelopes.propose_memory_request_schema import ProposeRequest
from .envelopes.propose_memory_response_schema import ProposeResponse
from .envelopes.purge_memory_request_schema import PurgeRequest
from .envelopes.purge_memory_response_schema import PurgeReceipt
from .envelopes.put_content_request_schema import PutContentRequest
from .envelopes.put_content_response_schema import PutContentResponse
from .envelopes.read_events_request_schema import ReadEventsRequest
from .envelopes.read_events_response_schema import ReadEventsResponse
from .envelopes.read_kernel_events_request_schema import ReadKernelEventsRequest
from .envelopes.read_kernel_events_response_schema import ReadKernelEventsResponse
from .envelopes.read_memory_request_schema import ReadMemoryRequest
from .envelopes.read_memory_response_schema import ReadMemoryResponse
from .envelopes.recall_memory_request_schema import RecallRequest
from .envelopes.recall_memory_response_schema import RecallResponse
from .envelopes.reconcile_request_schema import ReconcileRequest
from .envelopes.render_context_request_schema import RenderRequest
from .envelopes.render_context_response_schema import RenderResponse
from .envelopes.resident_snapshot_request_schema import ResidentRequest
from .envelopes.resident_snapshot_response_schema import ResidentSnapshot
from .envelopes.validate_request_request_schema import ValidateRequest
from .envelopes.validate_request_response_schema import ValidateResponse
from .envelopes.verify_store_request_schema import VerifyRequest
from .envelopes.verify_store_response_schema import VerifyReport

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
#: The commands whose request carries `now` (the others refuse it).
TAKES_NOW = frozenset({
    "append-events", "compact-context", "consolidate-memory", "continue-operation", "decide-memory", "delete-memory",
    "import-messages", "plan-context", "propose-memory", "purge-memory", "put-content", "read-memory", "recall-memory",
    "reconcile", "resident-snapshot",
})
#: The request a command's request carries, which is filled the same way.
CARRIED = {"render-context": ("plan", "plan-context")}
#: What every host answers when the kernel traps (the trap's own text differs per engine).
TRAPPED = "the kernel trapped; the call was rolled back"

log = logging.getLogger("ctxkernel_sdk")


def _text(request: Union[str, Mapping[str, Any]]) -> bytes:
    """A request as UTF-8: text as given, an object as JSON (NaN and Infinity
    refused, as every host does: json writes them as no JSON reader reads)."""
    try:
        text = request if isinstance(request, str) else json.dumps(request, allow_nan=False)
    except ValueError as e:
        if not str(e).startswith("Out of range float values"):
            raise
        raise KernelError("invalid-request", "the request holds a number that is not finite (NaN or Infinity), which JSON cannot carry") from e
    except TypeError as e:  # a Decimal, a numpy number, a datetime: JSON has no such value
        raise KernelError("invalid-request", f"the request holds a value JSON cannot carry: {e}") from e
    try:
        return text.encode()
    except UnicodeEncodeError as e:
        raise KernelError("invalid-request", "the request is not valid Unicode: it holds a lone surrogate") from e


class Kernel:
    """One kernel instance over one store.

    `clock` gives `now` to requests that leave it out (the host clock unless
    given). `max_memory_bytes` bounds the instance's linear memory: a call
    that needs more traps, and is rolled back like any trap.
    `component_sha256` names the component it runs (the packaged one unless
    `component` is a path)."""

    def __init__(
        self,
        store: Optional[Store] = None,
        *,
        clock: Optional[Clock] = None,
        component: Optional[str] = None,
        max_memory_bytes: Optional[int] = None,
    ) -> None:
        self.store: Store = store if store is not None else MemoryStore()
        self.clock: Clock = clock if clock is not None else utc_now
        self._engine, self._module, self.component_sha256 = runtime(component)
        self._max_memory = max_memory_bytes
        self._instance: Optional[Instance] = None

    def _transact(self, command: str, *args: bytes) -> bytes:
        started = time.perf_counter()
        outcome = "internal"
        try:
            answer = self._run(command, *args)
            outcome = "ok"
            return answer
        except KernelError as e:
            outcome = e.code
            raise
        finally:
            ms = (time.perf_counter() - started) * 1000
            # The kernel's own answers, errors included, are the caller's to act on; a trap or a failing store is the host's.
            level = logging.WARNING if outcome in ("internal", "storage-failure") else logging.DEBUG
            log.log(level, "%s: %s in %.2f ms", command, outcome, ms, extra={"command": command, "outcome": outcome, "duration_ms": ms})

    def _run(self, command: str, *args: bytes) -> bytes:
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

    def call(self, command: str, request: Union[str, Mapping[str, Any]], content: Optional[bytes] = None) -> str:
        """Runs one JSON command, or `put-content` with its `content`; returns
        the kernel's canonical JSON text verbatim. Requests are sent as given."""
        if command == "put-content":
            if content is None:
                raise KernelError("invalid-request", "put-content carries bytes: give them as `content`")
            return self._transact(command, _text(request), bytes(content)).decode()
        if command not in COMMANDS:
            raise KernelError("invalid-request", f"no command `{command}`")
        return self._transact(command, _text(request)).decode()

    def _filled(self, command: str, request: Mapping[str, Any]) -> dict[str, Any]:
        """`request` with what the caller left out filled in: `schemaVersion`,
        and `now` where the command takes it. The caller's object is not changed."""
        if not isinstance(request, Mapping):
            raise KernelError("invalid-request", f"a {command} request is an object, not {type(request).__name__}")
        out = dict(request)
        # Absent or null is left out: either way the shim fills it.
        if out.get("schemaVersion") is None:
            out["schemaVersion"] = 1
        if command in TAKES_NOW and out.get("now") is None:
            out["now"] = self.clock()
        if command in CARRIED:
            field, carried = CARRIED[command]
            if isinstance(out.get(field), Mapping):
                out[field] = self._filled(carried, out[field])
        return out

    def _json(self, command: str, request: Mapping[str, Any]) -> Any:
        return json.loads(self.call(command, self._filled(command, request)))

    def info(self) -> InfoResponse:
        return cast(InfoResponse, self._json("info", {}))

    def plan_context(self, request: PlanRequest) -> ContextPlan:
        return cast(ContextPlan, self._json("plan-context", request))

    def append_events(self, request: AppendEventsRequest) -> AppendEventsResponse:
        return cast(AppendEventsResponse, self._json("append-events", request))

    def read_events(self, request: ReadEventsRequest) -> ReadEventsResponse:
        return cast(ReadEventsResponse, self._json("read-events", request))

    def compact_context(self, request: CompactRequest) -> CompactResponse:
        return cast(CompactResponse, self._json("compact-context", request))

    def continue_operation(self, request: ContinueRequest) -> Union[CompactResponse, ConsolidateResponse]:
        """Answers an `awaiting-provider` operation: a compaction, or an extraction (`ext-…`)."""
        return cast(Union[CompactResponse, ConsolidateResponse], self._json("continue-operation", request))

    def reconcile(self, request: ReconcileRequest) -> Union[CompactResponse, DeletionReceipt]:
        """Settles an operation: a compaction (its receipt) or a deletion's replicas (`del-…`, its receipt)."""
        return cast(Union[CompactResponse, DeletionReceipt], self._json("reconcile", request))

    def read_kernel_events(self, request: Optional[ReadKernelEventsRequest] = None) -> ReadKernelEventsResponse:
        return cast(ReadKernelEventsResponse, self._json("read-kernel-events", request if request is not None else {}))

    def propose_memory(self, request: ProposeRequest) -> ProposeResponse:
        return cast(ProposeResponse, self._json("propose-memory", request))

    def consolidate_memory(self, request: ConsolidateRequest) -> ConsolidateResponse:
        return cast(ConsolidateResponse, self._json("consolidate-memory", request))

    def decide_memory(self, request: DecideRequest) -> MemoryReceipt:
        return cast(MemoryReceipt, self._json("decide-memory", request))

    def delete_memory(self, request: DeleteRequest) -> DeletionReceipt:
        return cast(DeletionReceipt, self._json("delete-memory", request))

    def purge_memory(self, request: PurgeRequest) -> PurgeReceipt:
        return cast(PurgeReceipt, self._json("purge-memory", request))

    def read_memory(self, request: ReadMemoryRequest) -> ReadMemoryResponse:
        return cast(ReadMemoryResponse, self._json("read-memory", request))

    def recall_memory(self, request: RecallRequest) -> RecallResponse:
        return cast(RecallResponse, self._json("recall-memory", request))

    def resident_snapshot(self, request: ResidentRequest) -> ResidentSnapshot:
        return cast(ResidentSnapshot, self._json("resident-snapshot", request))

    def import_messages(self, request: ImportRequest) -> ImportResponse:
        """Appends what the session does not hold yet of a provider transcript; importing it again appends nothing."""
        return cast(ImportResponse, self._json("import-messages", request))

    def render_context(self, request: RenderRequest) -> RenderResponse:
        """Plans and renders; `bodyJson` is the body's exact text, to send as it is (`body` is it parsed)."""
        text = self.call("render-context", self._filled("render-context", request))
        response = json.loads(text)
        response["bodyJson"] = _member(text, "body")
        return cast(RenderResponse, response)

    def validate_request(self, request: ValidateRequest) -> ValidateResponse:
        return cast(ValidateResponse, self._json("validate-request", request))

    def verify_store(self, request: Optional[VerifyRequest] = None) -> VerifyReport:
        """Reads every memory entry against its record and names each problem by key; changes nothing."""
        return cast(VerifyReport, self._json("verify-store", request if request is not None else {}))

    def put_content(self, request: Union[str, PutContentRequest], content: bytes) -> PutContentResponse:
        """Stores `content` by its sha256; returns `{contentRef, created}`. Text requests are sent as given."""
        text = request if isinstance(request, str) else self._filled("put-content", request)
        return cast(PutContentResponse, json.loads(self.call("put-content", text, content)))

    def get_content(self, request: Union[str, GetContentRequest]) -> bytes:
        """The stored bytes, verified against their digest by the kernel. Text requests are sent as given."""
        return self._transact("get-content", _text(request if isinstance(request, str) else self._filled("get-content", request)))

    def compact(self, request: CompactRequest, provider: Optional[Provider] = None) -> CompactResponse:
        """Compacts, calling `provider(providerRequest)` whenever the kernel asks
        for a summary. It returns `{"text": ..., "usage": {"inputTokens": ...,
        "outputTokens": ...}}`; raising is a failed call, `ProviderOutcomeUnknown`
        an unknown outcome (reconcile it), `ProviderCancelled` gives up. An
        answer of another shape is a `KernelError` (`invalid-request`), and the
        operation stays awaiting its provider."""
        return cast(CompactResponse, drive(self, self.compact_context(request), provider))

    async def compact_async(self, request: CompactRequest, provider: AsyncProvider) -> CompactResponse:
        """`compact` with an async provider."""
        return cast(CompactResponse, await drive_async(self, self.compact_context(request), provider))

    def consolidate(self, request: ConsolidateRequest, provider: Optional[Provider] = None) -> ConsolidateResponse:
        """Extracts candidate memories from a session, calling `provider` like `compact`."""
        return cast(ConsolidateResponse, drive(self, self.consolidate_memory(request), provider))

    async def consolidate_async(self, request: ConsolidateRequest, provider: AsyncProvider) -> ConsolidateResponse:
        """`consolidate` with an async provider."""
        return cast(ConsolidateResponse, await drive_async(self, self.consolidate_memory(request), provider))


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
