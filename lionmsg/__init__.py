"""lionmsg: the message-record layer of LLM-agent systems (LionAGI ADR-0006), schema-first.

The public surface is flat: import everything from `lionmsg`. Data shapes are generated from the JSON
Schemas in `schemas/` into `lionmsg.generated`; behaviour is handwritten in `lionmsg.runtime`.
"""

from lionmsg.generated.content import (
    ActionRequestContent,
    ActionResponseContent,
    AnyContent,
    AssistantResponseContent,
    InstructionContent,
    SystemContent,
)
from lionmsg.generated.messages import (
    LION_CLASSES,
    SCHEMA_IDS,
    ActionRequest,
    ActionResponse,
    AssistantResponse,
    Instruction,
    Message,
    System,
)
from lionmsg.generated.roles import MessageRole
from lionmsg.runtime.addressing import SenderRecipient
from lionmsg.runtime.branch import Branch
from lionmsg.runtime.concepts import Sendable
from lionmsg.runtime.content.base import MessageContent
from lionmsg.runtime.element import Element, Node
from lionmsg.runtime.exchange import DroppedMail, Exchange
from lionmsg.runtime.factories import AddMessageArguments
from lionmsg.runtime.flow import Flow
from lionmsg.runtime.manager import MessageManager
from lionmsg.runtime.pile import Pile
from lionmsg.runtime.progression import Progression

RoledMessage = Message
"""The same object as `Message` (ADR-0006 D6): no subclass, no extra validation, no role guarantee."""

__version__ = "0.1.0"

__all__ = [
    "LION_CLASSES",
    "SCHEMA_IDS",
    "ActionRequest",
    "ActionRequestContent",
    "ActionResponse",
    "ActionResponseContent",
    "AddMessageArguments",
    "AnyContent",
    "AssistantResponse",
    "AssistantResponseContent",
    "Branch",
    "DroppedMail",
    "Element",
    "Exchange",
    "Flow",
    "Instruction",
    "InstructionContent",
    "Message",
    "MessageContent",
    "MessageManager",
    "MessageRole",
    "Node",
    "Pile",
    "Progression",
    "RoledMessage",
    "SenderRecipient",
    "Sendable",
    "System",
    "SystemContent",
    "__version__",
]
