"""Compatibility labels kept for code ported from LionAGI (ADR-0006 D6).

`Sendable` is a marker only: it declares no abstract members and enforces nothing. The real
sender/recipient contract lives in the concrete `Message` fields and their validators.
"""

from __future__ import annotations

from abc import ABC

__all__ = ["Sendable"]


class Sendable(ABC):  # noqa: B024 - a marker by design (ADR-0006 D6)
    """Sendable entities must define 'sender' and 'recipient'."""
