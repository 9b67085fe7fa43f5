"""LionAGI 0.36.0 (runs under the bench environment's interpreter; lionagi is untyped here)."""

from __future__ import annotations

from importlib.metadata import version
from typing import Any

from lionagi.protocols.messages import (  # type: ignore[import-not-found, unused-ignore]
    AssistantResponse,
    Instruction,
    MessageManager,
)
from lionagi.session.exchange import Exchange  # type: ignore[import-not-found, unused-ignore]

from bench.harness import WorkloadFn
from bench.systems.lion_api import LionApi, workloads


def _chat_msgs(manager: Any) -> list[dict[str, Any]]:
    # LionAGI caches each message's rendering; the workload measures rendering every message.
    chat: list[dict[str, Any]] = manager.to_chat_msgs(_use_render_cache=False)
    return chat


API = LionApi(
    MessageManager=MessageManager,
    Instruction=Instruction,
    AssistantResponse=AssistantResponse,
    Exchange=Exchange,
    chat_msgs=_chat_msgs,
)

WORKLOADS: dict[str, WorkloadFn] = workloads(API)


def describe() -> dict[str, str]:
    return {"lionagi": version("lionagi"), "pydantic": version("pydantic")}
