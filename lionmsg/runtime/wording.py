"""Words in messages that name a class or count things: "an Instruction", "1 message", "2 messages"."""

from __future__ import annotations

__all__ = ["counted", "with_article"]


def with_article(name: str) -> str:
    """A class name with its article: "an Instruction", "a Branch"."""
    return f"{'an' if name[0] in 'AEIOU' else 'a'} {name}"


def counted(count: int, noun: str) -> str:
    """`count` and `noun`, plural unless one: "1 message", "0 messages" (`noun` takes an "s")."""
    return f"{count} {noun}{'' if count == 1 else 's'}"
