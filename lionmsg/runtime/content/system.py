"""System content: the system prompt and its optional time stamp (ADR-0006 D2)."""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any

from lionmsg.runtime.content.base import MessageContent

__all__ = ["SystemBehaviour", "current_system_time"]


def current_system_time() -> str:
    """The current UTC time at minute precision, as `system_datetime=True` records it."""
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="minutes")


class SystemBehaviour(MessageContent):
    if TYPE_CHECKING:
        # Fields of the generated subclass, from its schema.
        system_message: str
        system_datetime: Any
    else:
        __slots__ = ()

    def _normalize(self) -> None:
        # True stamps the current time, False means none; a string is kept as given, and a date or a
        # datetime becomes the text LionAGI renders it as (str()), which a record can hold.
        if self.system_datetime is True:
            self.system_datetime = current_system_time()
        elif self.system_datetime is False:
            self.system_datetime = None
        elif isinstance(self.system_datetime, dt.date):  # a datetime is a date too
            self.system_datetime = str(self.system_datetime)

    @property
    def rendered(self) -> str:
        """`System Time: <time>`, a blank line, then the prompt; just the prompt without a time."""
        if self.system_datetime:
            return f"System Time: {self.system_datetime}\n\n{self.system_message}"
        return self.system_message
