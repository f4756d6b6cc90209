"""ctxkernel for Python: the one Context/Memory Kernel component, run by wasmtime.

    pip install ctxkernel-sdk

    from ctxkernel_sdk import Kernel, SqliteStore
    kernel = Kernel(SqliteStore("agent.sqlite"))
    plan = kernel.plan_context({...})

Typed envelopes (TypedDicts generated from the kernel's JSON Schemas) are in
`ctxkernel_sdk.envelopes`.
"""

from ._engine import COMPONENT_SHA256
from ._errors import KernelError
from ._kernel import COMMANDS, Kernel
from ._provider import ProviderCancelled, ProviderOutcomeUnknown
from ._stores import Entry, MemoryStore, SqliteStore, Store, StoreConflict, StoreError

__all__ = [
    "COMMANDS",
    "COMPONENT_SHA256",
    "Entry",
    "Kernel",
    "KernelError",
    "MemoryStore",
    "ProviderCancelled",
    "ProviderOutcomeUnknown",
    "SqliteStore",
    "Store",
    "StoreConflict",
    "StoreError",
]
