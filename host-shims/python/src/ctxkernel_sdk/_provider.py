"""The provider loop: while the kernel is awaiting a provider, ask the host's
model and hand its outcome back with `continue-operation`."""

from __future__ import annotations

import inspect
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Optional, Union, cast

from typing_extensions import TypedDict

from ._errors import KernelError
from .envelopes.compact_context_response_schema import ProviderRequest
from .envelopes.continue_operation_request_schema import ContinueRequest, Usage

if TYPE_CHECKING:
    from ._kernel import Kernel


class ProviderAnswer(TypedDict):
    """What a provider callback returns: the model's text and what it cost."""

    text: str
    usage: Usage


#: A provider callback: the kernel's request in, its answer out.
Provider = Callable[[ProviderRequest], ProviderAnswer]
#: An async one (`compact_async` also takes a plain `Provider`).
AsyncProvider = Callable[[ProviderRequest], Union[Awaitable[ProviderAnswer], ProviderAnswer]]


class ProviderOutcomeUnknown(Exception):
    """Raise from a provider callback when nobody knows whether the call happened."""


class ProviderCancelled(Exception):
    """Raise from a provider callback to give up on the operation."""


def drive(kernel: Kernel, receipt: Any, provider: Optional[Provider]) -> Any:
    """Answers `awaiting-provider` until the kernel settles the operation (or there is no provider)."""
    while receipt["status"] == "awaiting-provider" and provider is not None:
        try:
            answer, error = provider(receipt["providerRequest"]), None
        except Exception as e:  # handed to the kernel as the call's outcome
            answer, error = None, e
        receipt = _settle(kernel, receipt, answer, error)
    return receipt


async def drive_async(kernel: Kernel, receipt: Any, provider: AsyncProvider) -> Any:
    """`drive` with an async provider."""
    while receipt["status"] == "awaiting-provider":
        try:
            answer, error = provider(receipt["providerRequest"]), None
            if inspect.isawaitable(answer):
                answer = await answer
        except Exception as e:
            answer, error = None, e
        receipt = _settle(kernel, receipt, answer, error)
    return receipt


def _settle(kernel: Kernel, receipt: Any, answer: Any, error: Optional[Exception]) -> Any:
    response: dict[str, Any]
    if error is None:
        text, usage = _answer(answer, receipt["operationId"])
        response = {"outcome": "success", "text": text, "usage": usage}
    elif isinstance(error, ProviderOutcomeUnknown):
        response = {"outcome": "unknown", "reason": str(error)}
    elif isinstance(error, ProviderCancelled):
        response = {"outcome": "cancelled", "reason": str(error)}
    else:
        response = {"outcome": "failed", "error": str(error)}
    return kernel.continue_operation(cast(ContinueRequest, {"operationId": receipt["operationId"], "response": response}))


def _answer(answer: Any, operation_id: str) -> tuple[Any, Any]:
    """The callback's text and usage; an answer of another shape is the
    caller's error, and the operation stays awaiting (continue or reconcile it)."""
    def wrong(field: str, what: str) -> KernelError:
        detail = json.dumps({"field": field, "operationId": operation_id}, separators=(",", ":"))
        return KernelError("invalid-request", f"the provider callback's answer {what}: it must be {{\"text\": str, \"usage\": {{\"inputTokens\": int, \"outputTokens\": int}}}}", detail)

    if not isinstance(answer, Mapping):
        raise wrong("answer", f"is {type(answer).__name__}, not a mapping")
    if not isinstance(answer.get("text"), str):
        raise wrong("text", "has no `text` string")
    if not isinstance(answer.get("usage"), Mapping):
        raise wrong("usage", "has no `usage` mapping")
    return answer["text"], dict(answer["usage"])
