"""The provider loop: while the kernel is awaiting a provider, ask the host's
model and hand its outcome back with `continue-operation`."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import TYPE_CHECKING, Awaitable, Callable, Optional

if TYPE_CHECKING:
    from ._kernel import Kernel


class ProviderOutcomeUnknown(Exception):
    """Raise from a provider callback when nobody knows whether the call happened."""


class ProviderCancelled(Exception):
    """Raise from a provider callback to give up on the operation."""


def drive(kernel: Kernel, receipt: dict, provider: Optional[Callable[[dict], dict]], clock: Optional[Callable[[], str]]) -> dict:
    """Answers `awaiting-provider` until the kernel settles the operation (or there is no provider)."""
    while receipt["status"] == "awaiting-provider" and provider is not None:
        try:
            answer, error = provider(receipt["providerRequest"]), None
        except Exception as e:  # handed to the kernel as the call's outcome
            answer, error = None, e
        receipt = _settle(kernel, receipt, answer, error, clock)
    return receipt


async def drive_async(kernel: Kernel, receipt: dict, provider: Callable[[dict], Awaitable[dict]], clock: Optional[Callable[[], str]]) -> dict:
    """`drive` with an async provider."""
    while receipt["status"] == "awaiting-provider":
        try:
            answer, error = await provider(receipt["providerRequest"]), None
        except Exception as e:
            answer, error = None, e
        receipt = _settle(kernel, receipt, answer, error, clock)
    return receipt


def _settle(kernel: Kernel, receipt: dict, answer: Optional[dict], error: Optional[Exception], clock: Optional[Callable[[], str]]) -> dict:
    if error is None:
        response = {"outcome": "success", "text": answer["text"], "usage": answer["usage"]}
    elif isinstance(error, ProviderOutcomeUnknown):
        response = {"outcome": "unknown", "reason": str(error)}
    elif isinstance(error, ProviderCancelled):
        response = {"outcome": "cancelled", "reason": str(error)}
    else:
        response = {"outcome": "failed", "error": str(error)}
    now = clock() if clock else datetime.now(timezone.utc).isoformat().replace("+00:00", "Z")
    return kernel.continue_operation(
        {"schemaVersion": 1, "operationId": receipt["operationId"], "now": now, "response": response}
    )
