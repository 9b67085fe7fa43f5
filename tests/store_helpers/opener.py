"""Child process of the store's open-race test: round after round, opens one new store file at the same
moment as its sibling processes (a shared barrier), writes its own branch, closes it, and reports how
the round went ("ok" or the error)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lionmsg import MessageManager
from lionmsg.store import SQLiteStore


def open_rounds(directory: str, rounds: int, index: int, barrier: Any, results: Any) -> None:
    for round_ in range(rounds):
        barrier.wait(timeout=60)  # a sibling that died breaks the barrier instead of hanging the test
        try:
            with SQLiteStore(Path(directory) / f"{round_}.db") as store:
                manager = MessageManager()
                store.attach(manager, f"p{index}")
                manager.add_message(instruction=f"from {index} in round {round_}")
        except Exception as error:
            results.put((round_, index, f"{type(error).__name__}: {error}"))
        else:
            results.put((round_, index, "ok"))
