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
(none: the kernel derives it from the content), `priority` (0) and `trust`.
The kernel checks everything it is given; these only spare writing it.
"""

from __future__ import annotations

from typing import Optional, Sequence

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


def _item(
    kind: ItemKind,
    text: Optional[str],
    trust: Trust,
    origin: Origin,
    *,
    scope: Scope,
    scope_id: Optional[str],
    sensitivity: Sensitivity,
    allowed_sinks: Optional[Sequence[str]],
    created_at: Optional[str],
    source: Optional[SourceRef],
    item_id: Optional[str],
    priority: int,
    pinned: bool = False,
    role: Optional[Role] = None,
) -> ContextItem:
    item: ContextItem = {
        "schemaVersion": 1,
        "kind": kind,
        "scope": scope,
        "sourceRef": source if source is not None else {"kind": "host", "id": "host"},
        "provenance": {"origin": origin},
        "trust": trust,
        "sensitivity": sensitivity,
        "allowedSinks": list(allowed_sinks) if allowed_sinks is not None else ["model:*"],
        "priority": priority,
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
    trust: Trust = "user",
    scope: Scope = "session",
    scope_id: Optional[str] = None,
    sensitivity: Sensitivity = "internal",
    allowed_sinks: Optional[Sequence[str]] = None,
    created_at: Optional[str] = None,
    source: Optional[SourceRef] = None,
    item_id: Optional[str] = None,
    priority: int = 0,
) -> ContextItem:
    """The user's words: a `message` with role `user`."""
    return _item("message", text, trust, "user", role="user", scope=scope, scope_id=scope_id, sensitivity=sensitivity,
                 allowed_sinks=allowed_sinks, created_at=created_at, source=source, item_id=item_id, priority=priority)


def assistant(
    text: Optional[str] = None,
    *,
    tool_calls: Sequence[ToolCall] = (),
    trust: Trust = "verified",
    scope: Scope = "session",
    scope_id: Optional[str] = None,
    sensitivity: Sensitivity = "internal",
    allowed_sinks: Optional[Sequence[str]] = None,
    created_at: Optional[str] = None,
    source: Optional[SourceRef] = None,
    item_id: Optional[str] = None,
    priority: int = 0,
) -> ContextItem:
    """The model's answer: a `message` with role `assistant`, and the tool
    calls it makes (`{"callId", "name", "arguments"}`, the arguments as the
    model wrote them). It needs text, calls, or both; calls alone have the
    empty text, as a provider's transcript gives them."""
    if text is None and not tool_calls:
        raise KernelError("invalid-request", "an assistant item needs text or tool calls", '{"field":"toolCalls"}')
    item = _item("message", text if text is not None else "", trust, "model", role="assistant", scope=scope, scope_id=scope_id, sensitivity=sensitivity,
                 allowed_sinks=allowed_sinks, created_at=created_at, source=source, item_id=item_id, priority=priority)
    if tool_calls:
        item["toolCalls"] = list(tool_calls)
    return item


def system(
    text: str,
    *,
    trust: Trust = "host",
    scope: Scope = "session",
    scope_id: Optional[str] = None,
    sensitivity: Sensitivity = "internal",
    allowed_sinks: Optional[Sequence[str]] = None,
    created_at: Optional[str] = None,
    source: Optional[SourceRef] = None,
    item_id: Optional[str] = None,
    priority: int = 0,
) -> ContextItem:
    """The host's own instructions: a `system-policy` item."""
    return _item("system-policy", text, trust, "host", scope=scope, scope_id=scope_id, sensitivity=sensitivity,
                 allowed_sinks=allowed_sinks, created_at=created_at, source=source, item_id=item_id, priority=priority)


def tool_result(
    call_id: str,
    text: str,
    *,
    outcome: ToolOutcome = "success",
    trust: Trust = "verified",
    scope: Scope = "session",
    scope_id: Optional[str] = None,
    sensitivity: Sensitivity = "internal",
    allowed_sinks: Optional[Sequence[str]] = None,
    created_at: Optional[str] = None,
    source: Optional[SourceRef] = None,
    item_id: Optional[str] = None,
    priority: int = 0,
) -> ContextItem:
    """What a tool answered to the call `call_id`: a `tool-evidence` item."""
    item = _item("tool-evidence", text, trust, "tool", scope=scope, scope_id=scope_id, sensitivity=sensitivity,
                 allowed_sinks=allowed_sinks, created_at=created_at, source=source, item_id=item_id, priority=priority)
    item["toolResult"] = {"callId": call_id, "outcome": outcome}
    return item


def task_state(
    task_id: str,
    status: TaskStatus,
    text: str,
    *,
    trust: Trust = "host",
    scope: Scope = "session",
    scope_id: Optional[str] = None,
    sensitivity: Sensitivity = "internal",
    allowed_sinks: Optional[Sequence[str]] = None,
    created_at: Optional[str] = None,
    source: Optional[SourceRef] = None,
    item_id: Optional[str] = None,
    priority: int = 0,
) -> ContextItem:
    """Where the task `task_id` stands: a `task-state` item."""
    item = _item("task-state", text, trust, "host", scope=scope, scope_id=scope_id, sensitivity=sensitivity,
                 allowed_sinks=allowed_sinks, created_at=created_at, source=source, item_id=item_id, priority=priority)
    item["task"] = {"taskId": task_id, "status": status}
    return item


def pinned_rule(
    text: str,
    *,
    trust: Trust = "host",
    scope: Scope = "session",
    scope_id: Optional[str] = None,
    sensitivity: Sensitivity = "internal",
    allowed_sinks: Optional[Sequence[str]] = None,
    created_at: Optional[str] = None,
    source: Optional[SourceRef] = None,
    item_id: Optional[str] = None,
    priority: int = 0,
) -> ContextItem:
    """A project rule the model always sees: a pinned `project-rule` item."""
    return _item("project-rule", text, trust, "host", pinned=True, scope=scope, scope_id=scope_id, sensitivity=sensitivity,
                 allowed_sinks=allowed_sinks, created_at=created_at, source=source, item_id=item_id, priority=priority)
