"""ctxkernel for Python: the one Context/Memory Kernel component, run by wasmtime.

    from ctxkernel import Kernel, SqliteStore
    kernel = Kernel(SqliteStore("agent.sqlite"))
    plan = kernel.plan_context({...})

Typed envelopes (TypedDicts generated from the kernel's JSON Schemas) are in
`ctxkernel.envelopes`.
"""

from ._errors import KernelError
from ._kernel import COMMANDS, Kernel
from ._provider import ProviderCancelled, ProviderOutcomeUnknown
from ._stores import Entry, MemoryStore, SqliteStore, Store, StoreConflict, StoreError

__all__ = [
    "COMMANDS",
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
