"""lionmsg, driven through the LionAGI-shaped API it mirrors."""

from __future__ import annotations

from typing import Any

import pydantic

import lionmsg
from bench.harness import WorkloadFn
from bench.systems.lion_api import LionApi, workloads
from lionmsg import AssistantResponse, Exchange, Instruction, MessageManager


def _chat_msgs(manager: MessageManager) -> list[dict[str, Any]]:
    return manager.to_chat_msgs()  # rendering is computed on every access: nothing is cached


API = LionApi(
    MessageManager=MessageManager,
    Instruction=Instruction,
    AssistantResponse=AssistantResponse,
    Exchange=Exchange,
    chat_msgs=_chat_msgs,
)

WORKLOADS: dict[str, WorkloadFn] = workloads(API)


def describe() -> dict[str, str]:
    return {"lionmsg": lionmsg.__version__, "pydantic": pydantic.VERSION}
