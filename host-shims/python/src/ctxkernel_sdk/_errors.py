"""The kernel's error codes and the one error every command raises."""

from __future__ import annotations

import json
from typing import Any

#: The WIT's error codes in declaration order: the canonical ABI lowers an enum to its index.
ERROR_CODES = (
    "invalid-request", "unsupported-schema", "context-over-budget", "degraded", "stale", "reconciliation-required",
    "content-unavailable", "digest-mismatch", "scope-denied", "partial", "not-found", "conflict",
    "illegal-transition", "limit-exceeded", "storage-failure", "internal",
)


class KernelError(Exception):
    """The one error every command raises: the kernel's code, message and detail.

    `code` is the kernel's kebab-case code (`invalid-request`); the message,
    `str(error)`, does not repeat it (a traceback shows it as a note).
    `detail_json` is the kernel's detail text, byte for byte; `detail` is it parsed."""

    def __init__(self, code: str, message: str, detail_json: str = "{}") -> None:
        super().__init__(message)
        self.add_note(f"code: {code}")
        self.code = code
        self.message = message
        self.detail_json = detail_json or "{}"
        self.detail: dict[str, Any] = json.loads(self.detail_json)
