"""Child process of the snapshot crash test: saves a growing history to one snapshot file until it is
killed, printing the message count after each `save_snapshot` returned."""

from __future__ import annotations

import sys

from lionmsg import MessageManager, System
from lionmsg.store import save_snapshot


def main(path: str) -> None:
    manager = MessageManager(system=System(content={"system_message": "s"}))
    while True:
        manager.add_message(instruction="x" * 2000)  # big enough that a write takes a few syscalls
        save_snapshot(manager, path)
        print(len(manager), flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
