"""The floor: what a plain, straightforward pydantic v2 implementation of the same records costs.

A `BaseModel` with the envelope's fields whose content is a slots dataclass (pydantic validates and
dumps it natively, i.e. field by field like `dataclasses.asdict` / the constructor), kept in a dict
(id -> message) plus a list (order). No role fixing, address normalisation, record discriminator,
observer rules or drop records: the floor is the cost of the data shape alone. Rendering is a direct
f-string renderer for the content shapes the benchmark uses.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID, uuid4

from pydantic import BaseModel, Field

__all__ = ["Envelope", "FloorExchange", "History", "InstructionBody", "Mail", "Reply", "ResponseBody", "UserTurn"]


@dataclass(slots=True)
class InstructionBody:
    instruction: str | None = None
    guidance: str | None = None
    prompt_context: list[Any] = field(default_factory=list)

    def render(self) -> str:
        lines = []
        if self.guidance:
            lines.append(f"Guidance: {self.guidance}")
        if self.instruction:
            lines.append(f"Instruction: {self.instruction}")
        if self.prompt_context:
            lines.append("Context:")
            for item in self.prompt_context:
                if isinstance(item, dict):
                    lines.append("- " + "\n  ".join(f"{key}: {value}" for key, value in item.items()))
                else:
                    lines.append(f"- {item}")
        return "\n".join(lines)


@dataclass(slots=True)
class ResponseBody:
    assistant_response: str = ""

    def render(self) -> str:
        return self.assistant_response


class Envelope(BaseModel):
    """The record's fields, in LionAGI's key order."""

    id: UUID = Field(default_factory=uuid4)
    created_at: float = Field(default_factory=time.time)
    metadata: dict[str, Any] = Field(default_factory=dict)
    content: Any = None
    embedding: list[float] | None = None
    sender: UUID | str | None = None
    recipient: UUID | str | None = None
    channel: str | None = None
    role: str = "unset"


class UserTurn(Envelope):
    content: InstructionBody = Field(default_factory=InstructionBody)
    role: str = "user"


class Reply(Envelope):
    content: ResponseBody = Field(default_factory=ResponseBody)
    recipient: UUID | str | None = "user"
    role: str = "assistant"


Observer = Callable[[Envelope], Awaitable[None]]


class History:
    """Messages by id plus their order; an id already present is replaced where it stands."""

    __slots__ = ("items", "lock", "observers", "order")

    def __init__(self, observers: list[Observer] | None = None) -> None:
        self.items: dict[UUID, Envelope] = {}
        self.order: list[UUID] = []
        self.observers = observers or []
        self.lock = asyncio.Lock()

    def add(self, message: Envelope) -> Envelope:
        if message.id not in self.items:
            self.order.append(message.id)
        self.items[message.id] = message
        return message

    async def a_add(self, message: Envelope) -> Envelope:
        async with self.lock:
            self.add(message)
        for observer in self.observers:
            await observer(message)
        return message

    def to_chat_msgs(self) -> list[dict[str, Any]]:
        items = self.items
        return [{"role": m.role, "content": m.content.render()} for m in (items[ident] for ident in self.order)]


class Mail(Envelope):
    """Exchange traffic: any JSON content."""


@dataclass(slots=True)
class Mailbox:
    outbox: list[Mail] = field(default_factory=list)
    inboxes: dict[UUID, list[Mail]] = field(default_factory=dict)


class FloorExchange:
    """Mailboxes by owner id: send queues in the outbox, collect routes (broadcasts as deep copies)."""

    def __init__(self) -> None:
        self.mailboxes: dict[UUID, Mailbox] = {}

    def register(self, owner: UUID) -> None:
        self.mailboxes[owner] = Mailbox()

    def send(self, sender: UUID, recipient: UUID | None, content: Any) -> Mail:
        message = Mail(content=content, sender=sender, recipient=recipient)
        self.mailboxes[sender].outbox.append(message)
        return message

    async def collect(self, owner: UUID) -> int:
        box = self.mailboxes[owner]
        outbox, box.outbox = box.outbox, []
        delivered = 0
        for message in outbox:
            if message.recipient is None:
                targets = [box for other, box in self.mailboxes.items() if other != owner]
                for target in targets:
                    target.inboxes.setdefault(owner, []).append(message.model_copy(deep=True))
                delivered += bool(targets)
            else:
                mailbox = self.mailboxes.get(message.recipient)  # type: ignore[arg-type]  # a name finds none
                if mailbox is not None:
                    mailbox.inboxes.setdefault(owner, []).append(message)
                    delivered += 1
        return delivered

    async def collect_all(self) -> int:
        return sum([await self.collect(owner) for owner in list(self.mailboxes)])

    def receive(self, owner: UUID) -> list[Mail]:
        return [message for inbox in self.mailboxes[owner].inboxes.values() for message in inbox]
