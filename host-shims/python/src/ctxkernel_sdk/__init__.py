"""ctxkernel for Python: the one Context/Memory Kernel component, run by wasmtime.

    pip install ctxkernel-sdk

    from ctxkernel_sdk import Kernel, SqliteStore, items
    kernel = Kernel(SqliteStore("agent.sqlite"))
    kernel.append_events({"sessionId": "s1", "expectedHead": {"seq": 0}, "items": [items.user("Hi")]})
    plan = kernel.plan_context({"sessionId": "s1", "sink": "model:claude", "model": {...}})

Requests and responses are typed (TypedDicts generated from the kernel's
JSON Schemas, re-exported here); `items` builds the common items.
"""

from . import items
from ._engine import COMPONENT_SHA256
from ._errors import KernelError
from ._kernel import COMMANDS, Kernel
from ._provider import AsyncProvider, Provider, ProviderAnswer, ProviderCancelled, ProviderOutcomeUnknown
from ._stores import Entry, MemoryStore, SqliteStore, Store, StoreConflict, StoreError
from .envelopes.append_events_request_schema import AppendEventsRequest
from .envelopes.append_events_response_schema import AppendEventsResponse
from .envelopes.compact_context_request_schema import CompactRequest
from .envelopes.compact_context_response_schema import CompactResponse, ProviderRequest
from .envelopes.consolidate_memory_request_schema import ConsolidateRequest
from .envelopes.consolidate_memory_response_schema import ConsolidateResponse
from .envelopes.context_item_schema import ContextItem, ToolCall
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
from .envelopes.memory_record_schema import MemoryRecord
from .envelopes.plan_context_request_schema import ModelProfile, PlanRequest
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

__all__ = [
    "COMMANDS",
    "COMPONENT_SHA256",
    "AppendEventsRequest",
    "AppendEventsResponse",
    "AsyncProvider",
    "CompactRequest",
    "CompactResponse",
    "ConsolidateRequest",
    "ConsolidateResponse",
    "ContextItem",
    "ContextPlan",
    "ContinueRequest",
    "DecideRequest",
    "DeleteRequest",
    "DeletionReceipt",
    "Entry",
    "GetContentRequest",
    "ImportRequest",
    "ImportResponse",
    "InfoResponse",
    "Kernel",
    "KernelError",
    "MemoryReceipt",
    "MemoryRecord",
    "MemoryStore",
    "ModelProfile",
    "PlanRequest",
    "ProposeRequest",
    "ProposeResponse",
    "Provider",
    "ProviderAnswer",
    "ProviderCancelled",
    "ProviderOutcomeUnknown",
    "ProviderRequest",
    "PurgeReceipt",
    "PurgeRequest",
    "PutContentRequest",
    "PutContentResponse",
    "ReadEventsRequest",
    "ReadEventsResponse",
    "ReadKernelEventsRequest",
    "ReadKernelEventsResponse",
    "ReadMemoryRequest",
    "ReadMemoryResponse",
    "RecallRequest",
    "RecallResponse",
    "ReconcileRequest",
    "RenderRequest",
    "RenderResponse",
    "ResidentRequest",
    "ResidentSnapshot",
    "SqliteStore",
    "Store",
    "StoreConflict",
    "StoreError",
    "ToolCall",
    "ValidateRequest",
    "ValidateResponse",
    "VerifyReport",
    "VerifyRequest",
    "items",
]
