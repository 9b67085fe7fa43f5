"""Child process of the store crash test: changes one stored branch until it is killed, printing each
change after the call that made it returned (so the parent knows which changes must be durable).

    add <id>              an instruction was added
    replace <id> <n>      an existing instruction was re-added with guidance "v<n>"
    system <id>           a new system message was set

The branch is loaded first when the store holds it (a restart after a crash continues it).
"""

from __future__ import annotations

import random
import sys

from lionmsg import Instruction, MessageManager, System
from lionmsg.store import SQLiteStore, UnknownBranchError


def main(path: str, branch_id: str, seed: int) -> None:
    rng = random.Random(seed)
    store = SQLiteStore(path)
    try:
        manager = store.load(branch_id)
    except UnknownBranchError:
        manager = MessageManager()
    # Checkpoint the WAL often (every 16 pages instead of 1000), so kills also land mid-checkpoint.
    store._open().execute("PRAGMA wal_autocheckpoint = 16")
    store.attach(manager, branch_id)
    print("ready", flush=True)
    step = 0
    while True:
        step += 1
        instructions = [message for message in manager if isinstance(message, Instruction)]
        roll = rng.random()
        if roll < 0.75 or not instructions:
            message = manager.add_message(instruction=f"{seed}:{step}", context=["x" * rng.randrange(0, 3000)])
            print("add", message.id, flush=True)
        elif roll < 0.93:
            target = rng.choice(instructions)
            manager.add_message(instruction=target, guidance=f"v{step}")
            print("replace", target.id, step, flush=True)
        else:
            system = System(content={"system_message": f"{seed}:{step}"})
            manager.set_system(system)
            print("system", system.id, flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
