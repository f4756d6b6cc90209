"""The host clock, as the kernel reads instants: RFC 3339 in UTC, to the
millisecond, as every host writes it. The kernel itself reads no clock."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Callable

#: A clock: the current instant as RFC 3339 text.
Clock = Callable[[], str]


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
