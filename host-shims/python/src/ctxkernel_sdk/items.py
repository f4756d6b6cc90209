"""Context items for the common cases, with the defaults every host gives.

Each constructor returns a complete item, ready to append or plan:

- `user(text)`: the user's words (trust `user`, origin `user`);
- `assistant(text, tool_calls=...)`: the model's answer, and the calls it
  makes (trust `verified`, origin `model`), as an import gives them;
- `system(text)`: the host's own instructions, a `system-policy` item (trust
  `host`, origin `host`);
- `tool_result(call_id, text)`: what a tool answered to a call, as evidence
  (trust `verified`, origin `tool`; say `trust="external"` for a tool that
  reads the web or a file someone else wrote: its words then ground nothing);
- `task_state(task_id, status, text)`: where a task stands (trust `host`);
- `pinned_rule(text)`: a project rule kept under any budget (trust `host`).

Every one takes the same options, each with its default: `scope`
(`session`), `scope_id` (none: the session's, for `session`),
`sensitivity` (`internal`), `allowed_sinks` (`["model:*"]`), `created_at`
(the host clock), `source` (`{"kind": "host", "id": "host"}`), `item_id`
(none: the kernel derives it from the content), `priority` (0) and `trust`;
an option given as `None` takes its default. The kernel checks everything
it is given; these only spare writing it.
"""

from __future__ import annotations

from typing import Iterable, Optional

from ._clock import utc_now
from ._errors import KernelError
from .envelopes.context_item_schema import (
    ContextItem,
    ItemKind,
    Origin,
    Role,
    Scope,
    Sensitivity,
    SourceRef,
    TaskStatus,
    ToolCall,
    ToolOutcome,
    Trust,
)

__all__ = ["assistant", "pinned_rule", "system", "task_state", "tool_result", "user"]


def _sinks(allowed_sinks: Optional[Iterable[str]]) -> list[str]:
    if allowed_sinks is None:
        return ["model:*"]
    if isinstance(allowed_sinks, str):  # a string is iterable too, a character at a time
        raise KernelError("invalid-request", "`allowed_sinks` is a list of sinks, not one string", '{"field":"allowedSinks"}')
    return list(allowed_sinks)


def _item(
    kind: ItemKind,
    text: Optional[str],
    default_trust: Trust,
    origin: Origin,
    *,
    trust: Optional[Trust],
    scope: Optional[Scope],
    scope_id: Optional[str],
    sensitivity: Optional[Sensitivity],
    allowed_sinks: Optional[Iterable[str]],
    created_at: Optional[str],
    source: Optional[SourceRef],
    item_id: Optional[str],
    priority: Optional[int],
    pinned: bool = False,
    role: Optional[Role] = None,
) -> ContextItem:
    # An option given as None is one not given: it takes its default, as on every host.
    item: ContextItem = {
        "schemaVersion": 1,
        "kind": kind,
        "scope": scope if scope is not None else "session",
        "sourceRef": source if source is not None else {"kind": "host", "id": "host"},
        "provenance": {"origin": origin},
        "trust": trust if trust is not None else default_trust,
        "sensitivity": sensitivity if sensitivity is not None else "internal",
        "allowedSinks": _sinks(allowed_sinks),
        "priority": priority if priority is not None else 0,
        "pinned": pinned,
        "createdAt": created_at if created_at is not None else utc_now(),
    }
    if text is not None:
        item["content"] = text
    if role is not None:
        item["role"] = role
    if scope_id is not None:
        item["scopeId"] = scope_id
    if item_id is not None:
        item["itemId"] = item_id
    return item


def user(
    text: str,
    *,
    trust: Optional[Trust] = None,
    scope: Optional[Scope] = None,
    scope_id: Optional[str] = None,
    sensitivity: Optional[Sensitivity] = None,
    allowed_sinks: Optional[Iterable[str]] = None,
    created_at: Optional[str] = None,
    source: Optional[SourceRef] = None,
    item_id: Optional[str] = None,
    priority: Optional[int] = None,
) -> ContextItem:
    """The user's words: a `message` with role `user`."""
    return _item("message", text, "user", "user", trust=trust, role="user", scope=scope, scope_id=scope_id, sensitivity=sensitivity,
                 allowed_sinks=allowed_sinks, created_at=created_at, source=source, item_id=item_id, priority=priority)


def assistant(
    text: Optional[str] = None,
    *,
    tool_calls: Optional[Iterable[ToolCall]] = None,
    trust: Optional[Trust] = None,
    scope: Optional[Scope] = None,
    scope_id: Optional[str] = None,
    sensitivity: Optional[Sensitivity] = None,
    allowed_sinks: Optional[Iterable[str]] = None,
    created_at: Optional[str] = None,
    source: Optional[SourceRef] = None,
    item_id: Optional[str] = None,
    priority: Optional[int] = None,
) -> ContextItem:
    """The model's answer: a `message` with role `assistant`, and the tool
    calls it makes (`{"callId", "name", "arguments"}`, the arguments as the
    model wrote them). It needs text, calls, or both; calls alone have the
    empty text, as a provider's transcript gives them."""
    calls = list(tool_calls) if tool_calls is not None else []
    if text is None and not calls:
        raise KernelError("invalid-request", "an assistant item needs text or tool calls", '{"field":"toolCalls"}')
    item = _item("message", text if text is not None else "", "verified", "model", trust=trust, role="assistant", scope=scope, scope_id=scope_id, sensitivity=sensitivity,
                 allowed_sinks=allowed_sinks, created_at=created_at, source=source, item_id=item_id, priority=priority)
    if calls:
        item["toolCalls"] = calls
    return item


def system(
    text: str,
    *,
    trust: Optional[Trust] = None,
    scope: Optional[Scope] = None,
    scope_id: Optional[str] = None,
    sensitivity: Optional[Sensitivity] = None,
    allowed_sinks: Optional[Iterable[str]] = None,
    created_at: Optional[str] = None,
    source: Optional[SourceRef] = None,
    item_id: Optional[str] = None,
    priority: Optional[int] = None,
) -> ContextItem:
    """The host's own instructions: a `system-policy` item."""
    return _item("system-policy", text, "host", "host", trust=trust, scope=scope, scope_id=scope_id, sensitivity=sensitivity,
                 allowed_sinks=allowed_sinks, created_at=created_at, source=source, item_id=item_id, priority=priority)


def tool_result(
    call_id: str,
    text: str,
    *,
    outcome: Optional[ToolOutcome] = None,
    trust: Optional[Trust] = None,
    scope: Optional[Scope] = None,
    scope_id: Optional[str] = None,
    sensitivity: Optional[Sensitivity] = None,
    allowed_sinks: Optional[Iterable[str]] = None,
    created_at: Optional[str] = None,
    source: Optional[SourceRef] = None,
    item_id: Optional[str] = None,
    priority: Optional[int] = None,
) -> ContextItem:
    """What a tool answered to the call `call_id`: a `tool-evidence` item."""
    item = _item("tool-evidence", text, "verified", "tool", trust=trust, scope=scope, scope_id=scope_id, sensitivity=sensitivity,
                 allowed_sinks=allowed_sinks, created_at=created_at, source=source, item_id=item_id, priority=priority)
    item["toolResult"] = {"callId": call_id, "outcome": outcome if outcome is not None else "success"}
    return item


def task_state(
    task_id: str,
    status: TaskStatus,
    text: str,
    *,
    trust: Optional[Trust] = None,
    scope: Optional[Scope] = None,
    scope_id: Optional[str] = None,
    sensitivity: Optional[Sensitivity] = None,
    allowed_sinks: Optional[Iterable[str]] = None,
    created_at: Optional[str] = None,
    source: Optional[SourceRef] = None,
    item_id: Optional[str] = None,
    priority: Optional[int] = None,
) -> ContextItem:
    """Where the task `task_id` stands: a `task-state` item."""
    item = _item("task-state", text, "host", "host", trust=trust, scope=scope, scope_id=scope_id, sensitivity=sensitivity,
                 allowed_sinks=allowed_sinks, created_at=created_at, source=source, item_id=item_id, priority=priority)
    item["task"] = {"taskId": task_id, "status": status}
    return item


def pinned_rule(
    text: str,
    *,
    trust: Optional[Trust] = None,
    scope: Optional[Scope] = None,
    scope_id: Optional[str] = None,
    sensitivity: Optional[Sensitivity] = None,
    allowed_sinks: Optional[Iterable[str]] = None,
    created_at: Optional[str] = None,
    source: Optional[SourceRef] = None,
    item_id: Optional[str] = None,
    priority: Optional[int] = None,
) -> ContextItem:
    """A project rule the model always sees: a pinned `project-rule` item."""
    return _item("project-rule", text, "host", "host", trust=trust, pinned=True, scope=scope, scope_id=scope_id, sensitivity=sensitivity,
                 allowed_sinks=allowed_sinks, created_at=created_at, source=source, item_id=item_id, priority=priority)
