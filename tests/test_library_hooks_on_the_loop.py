"""The library's own hooks (a store's writer and listener, a Branch's view tracking) on the async paths:
they wait for the history's thread lock without blocking the event loop (review bq F1); after a
cancellation that comes meanwhile they run at once or in a thread of their own, the cancelled call
ending at once (reviews bu, bv, bx), and after a close they run waiting blocking."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

if sys.version_info < (3, 11):
    from exceptiongroup import BaseExceptionGroup

from lionmsg import Branch, Instruction, Message, MessageManager, Pile, Progression, System
from lionmsg.runtime import lockinghooks
from lionmsg.store import BranchTakenOverError, SQLiteStore

# How long a thread holding the history's lock waits for the loop, or for its release, before it gives
# up: a loop that the library blocks never runs what it waits for, and the test then fails after this,
# not for ever. Only a bug reaches it, so it is generous: a holder that gave up early on a stalled,
# shared machine would let go while the test still counts on its hold.
PATIENCE = 60.0


class LockHolder:
    """Another thread that takes the history's thread lock and, holding it, waits for a coroutine on the
    loop (README: hold `thread_lock` to make several calls one step)."""

    def __init__(self, manager: MessageManager, loop: asyncio.AbstractEventLoop) -> None:
        self.manager = manager
        self.loop = loop
        self.holding = threading.Event()
        self.outcome: list[str] = []
        self.thread = threading.Thread(target=self._hold)

    def _hold(self) -> None:
        with self.manager.messages.thread_lock:
            self.holding.set()
            try:
                self.outcome.append(asyncio.run_coroutine_threadsafe(_served(), self.loop).result(PATIENCE))
            except TimeoutError:  # concurrent.futures.TimeoutError is this one on 3.11+
                self.outcome.append("the loop never ran")
            except Exception as error:  # 3.10: concurrent.futures.TimeoutError is another class
                self.outcome.append(f"the loop never ran ({type(error).__name__})")

    def start(self) -> None:
        self.thread.start()
        self.holding.wait()


async def _served() -> str:
    await asyncio.sleep(0.02)
    return "served"


def _starting(holder_of: Callable[[], LockHolder]) -> Callable[[Any], None]:
    """A plain hook, put before the library's, that starts the lock holder and returns once it holds."""

    def start(_: Any) -> None:
        holder_of().start()

    return start


@contextmanager
def attached(path: Path, manager: MessageManager) -> Iterator[SQLiteStore]:
    with SQLiteStore(path) as store:
        store.attach(manager, "b")
        yield store


def stored(path: Path) -> list[dict[str, Any]]:
    with SQLiteStore(path) as fresh:
        return [message.to_dict() for message in fresh.load("b")]


def records(manager: MessageManager) -> list[dict[str, Any]]:
    return [message.to_dict() for message in manager]


def with_view(manager: MessageManager) -> Branch:
    branch = Branch(msgs=manager)
    branch.metadata["current_progression"] = Progression(order=[manager.system.id] if manager.system else [])
    return branch


def run_with_holder(manager: MessageManager, change: Callable[[], Any], *, listener: bool) -> LockHolder:
    """Run `change()` (a coroutine of the manager's async paths) on a fresh loop while another thread,
    started by a hook placed before the library's, holds the history's lock waiting for that loop."""
    holders: list[LockHolder] = []

    async def main() -> None:
        holders.append(LockHolder(manager, asyncio.get_running_loop()))
        starter = _starting(lambda: holders[0])
        if listener:
            manager.on_history_changed.insert(0, starter)
        else:

            async def observer(message: Any) -> None:
                starter(message)

            manager.on_message_added.insert(0, observer)
        await change()

    asyncio.run(main())
    holders[0].thread.join(PATIENCE * 2)
    return holders[0]


@pytest.mark.parametrize("follower", ["store", "branch", "both"])
def test_a_message_added_on_the_loop_while_another_thread_holds_the_lock_waiting_for_it(
    tmp_path: Path, follower: str
) -> None:
    manager = MessageManager(system=System(content={"system_message": "rules"}))
    branch = with_view(manager) if follower in ("branch", "both") else None
    with attached(tmp_path / "h.db", manager) if follower != "branch" else _nothing():
        holder = run_with_holder(manager, lambda: manager.a_add_message(instruction="from the loop"), listener=False)
    assert holder.outcome == ["served"]  # the loop kept running while the library's hooks waited
    added = list(manager)[-1]
    assert isinstance(added, Instruction)
    if follower != "branch":
        assert stored(tmp_path / "h.db") == records(manager)
    if branch is not None:
        assert list(branch.progression) == [manager.system.id, added.id]  # type: ignore[union-attr]


@pytest.mark.parametrize("follower", ["store", "branch"])
def test_a_clear_on_the_loop_while_another_thread_holds_the_lock_waiting_for_it(tmp_path: Path, follower: str) -> None:
    manager = MessageManager(system=System(content={"system_message": "rules"}))
    manager.add_message(instruction="gone soon")
    branch = with_view(manager) if follower == "branch" else None
    if branch is not None:
        branch.progression.append(list(manager)[-1].id)
    with attached(tmp_path / "h.db", manager) if follower == "store" else _nothing():
        holder = run_with_holder(manager, manager.aclear_messages, listener=True)
    assert holder.outcome == ["served"]
    assert len(manager) == 1
    if follower == "store":
        assert stored(tmp_path / "h.db") == records(manager)
    else:
        assert list(branch.progression) == [manager.system.id]  # type: ignore[union-attr]


@pytest.mark.parametrize("follower", ["store", "branch"])
def test_a_system_message_set_on_the_loop_while_another_thread_holds_the_lock_waiting_for_it(
    tmp_path: Path, follower: str
) -> None:
    manager = MessageManager(system=System(content={"system_message": "old rules"}))
    manager.add_message(instruction="kept")
    branch = with_view(manager) if follower == "branch" else None
    new = System(content={"system_message": "new rules"})
    with attached(tmp_path / "h.db", manager) if follower == "store" else _nothing():
        holder = run_with_holder(manager, lambda: manager.a_add_message(system=new), listener=True)
    assert holder.outcome == ["served"]
    assert manager.system is new
    if follower == "store":
        assert stored(tmp_path / "h.db") == records(manager)
    else:
        assert list(branch.progression) == [new.id]  # type: ignore[union-attr]


@contextmanager
def _nothing() -> Iterator[None]:
    yield


# -- a cancellation or close while a library hook waits --------------------------------------------


class HeldUntilReleased:
    """Another thread that, once started (by a hook placed before the library's), holds the history's
    lock until `release` is set; `first` runs in it once it holds the lock."""

    def __init__(self, manager: MessageManager, first: Callable[[], Any] = lambda: None) -> None:
        self.manager = manager
        self.first = first
        self.holding = threading.Event()
        self.release = threading.Event()

    def _hold(self) -> None:
        with self.manager.messages.thread_lock:
            self.first()
            self.holding.set()
            self.release.wait(PATIENCE)

    def start(self, _: Any) -> None:
        threading.Thread(target=self._hold).start()
        self.holding.wait()

    async def astart(self, message: Any) -> None:
        self.start(message)


async def cancelled_while_waiting(change: Coroutine[Any, Any, Any], holder: HeldUntilReleased) -> BaseException:
    """Run `change` into a library hook's wait for the lock `holder` holds, cancel it, check it ends at
    once (the holder still holding), let the holder go, wait for the hooks a thread runs for it, and
    return what the change raised."""
    task = asyncio.get_running_loop().create_task(change)
    for _ in range(20):  # into the hook's wait (it yields between its 1 ms slices)
        await asyncio.sleep(0)
    assert not task.done()
    task.cancel()
    with pytest.raises(asyncio.CancelledError) as stopped:
        await task
    assert not holder.release.is_set()  # it ended while the other thread still held the lock
    holder.release.set()
    hooks_handed_on_done()
    return stopped.value


def hooks_handed_on_done() -> None:
    """Wait for the threads running the library hooks a stopped change handed on (they need the lock
    only, never the loop: joining them from the loop's thread is safe)."""
    for thread in lockinghooks.handed_on():
        thread.join(PATIENCE)
        assert not thread.is_alive()


def closed_while_waiting(change: Coroutine[Any, Any, Any], holder: HeldUntilReleased) -> None:
    """Drive `change` by hand (inside a running loop: the pile's asyncio lock needs one) into a library
    hook's wait, then close it while the holder lets go 50 ms later."""
    for _ in range(5):  # each send runs to the next 1 ms slice of the hook's wait
        change.send(None)
    assert holder.holding.is_set()
    threading.Timer(0.05, holder.release.set).start()
    change.close()  # a closed coroutine cannot await: the hook waits for the lock blocking, runs, then closes


def lock_is_free(manager: MessageManager) -> bool:
    taken = manager.messages.thread_lock.acquire(blocking=False)
    if taken:
        manager.messages.thread_lock.release()
    return taken


def test_a_cancellation_while_the_store_waits_ends_the_add_at_once_and_a_thread_writes_later(tmp_path: Path) -> None:
    manager = MessageManager(system=System(content={"system_message": "rules"}))
    later: list[Any] = []
    holder = HeldUntilReleased(manager)
    with attached(tmp_path / "h.db", manager):
        manager.on_message_added.insert(0, holder.astart)
        manager.on_message_added.append(later.append)  # after the store's writer
        stop = asyncio.run(cancelled_while_waiting(manager.a_add_message(instruction="cancelled"), holder))
    assert isinstance(stop, asyncio.CancelledError)
    assert stored(tmp_path / "h.db") == records(manager)  # written by the loop once the lock was free
    assert later == []  # the observers after the store's did not run
    assert lock_is_free(manager)


def test_a_write_that_fails_in_the_thread_after_a_cancellation_is_that_threads_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    manager = MessageManager(system=System(content={"system_message": "rules"}))
    reported: list[BaseException | None] = []
    monkeypatch.setattr(threading, "excepthook", lambda hook_args: reported.append(hook_args.exc_value))

    def take_the_branch_over() -> None:
        with SQLiteStore(tmp_path / "h.db") as other:
            other.attach(MessageManager(), "b")

    holder = HeldUntilReleased(manager, first=take_the_branch_over)
    with attached(tmp_path / "h.db", manager):
        manager.on_message_added.insert(0, holder.astart)
        asyncio.run(cancelled_while_waiting(manager.a_add_message(instruction="too late"), holder))
    assert [type(error) for error in reported] == [BranchTakenOverError]  # reported, not lost
    assert stored(tmp_path / "h.db") == []  # the other writer's (empty) history stays


def test_a_close_while_the_branch_waits_tracks_the_message_first() -> None:
    manager = MessageManager(system=System(content={"system_message": "rules"}))
    branch = with_view(manager)
    holder = HeldUntilReleased(manager)
    manager.on_message_added.insert(0, holder.astart)

    async def main() -> None:
        adding = manager.a_add_message(instruction="closed while tracked")
        closed_while_waiting(adding, holder)

    asyncio.run(main())
    assert list(branch.progression) == [manager.system.id, list(manager)[-1].id]  # type: ignore[union-attr]
    assert lock_is_free(manager)


def test_a_close_while_a_library_hook_waits_runs_it_and_each_one_after_it_once() -> None:
    # Review cy L2: after a stop, the hooks from the one that was waiting on run at once or in a thread;
    # one that already ran is not run again (a Branch's tracking would not show it: it is idempotent).
    manager = MessageManager(system=System(content={"system_message": "rules"}))
    calls: list[str] = []
    waiting = lockinghooks.LockedCall(manager, lambda message: calls.append("waiting"))
    after = lockinghooks.LockedCall(manager, lambda message: calls.append("after"))
    holder = HeldUntilReleased(manager)
    manager.on_message_added[:0] = [holder.astart, waiting, after]

    async def main() -> None:
        closed_while_waiting(manager.a_add_message(instruction="closed while a hook waits"), holder)

    asyncio.run(main())
    for thread in lockinghooks.handed_on():
        thread.join(PATIENCE)
    assert calls == ["waiting", "after"]


def test_a_cancellation_an_observer_makes_another_error_still_runs_the_library_hook_after_it() -> None:
    # Review cy L2: on 3.11+ an error an observer raises while its add is cancelled (its cleanup failed)
    # stops the add as a cancellation, and the library's hooks after it still run (an off-by-one there
    # skipped the one right after it: the Branch missed the message); on 3.10 it is that observer's failure.
    manager = MessageManager(system=System(content={"system_message": "rules"}))
    started = asyncio.Event()

    async def converts(_: Any) -> None:
        started.set()
        try:
            await asyncio.sleep(PATIENCE)
        except asyncio.CancelledError:
            raise RuntimeError("cleanup failed") from None

    branch = with_view(manager)
    manager.on_message_added.insert(0, converts)  # before the Branch's tracker

    async def main() -> BaseException:
        task = asyncio.get_running_loop().create_task(manager.a_add_message(instruction="cut short"))
        await started.wait()
        task.cancel()
        try:
            await task
        except (asyncio.CancelledError, RuntimeError) as raised:
            return raised
        raise AssertionError("the add ended without the cancellation or the observer's error")

    ended = asyncio.run(main())
    for thread in lockinghooks.handed_on():
        thread.join(PATIENCE)
    assert type(ended) is (asyncio.CancelledError if sys.version_info >= (3, 11) else RuntimeError)
    assert list(branch.progression) == [manager.system.id, list(manager)[-1].id]  # type: ignore[union-attr]


@pytest.mark.parametrize("stop", ["cancel", "close"])
def test_a_stop_while_the_store_listener_waits_comes_after_it_wrote_the_clear(tmp_path: Path, stop: str) -> None:
    manager = MessageManager(system=System(content={"system_message": "rules"}))
    manager.add_message(instruction="gone soon")
    heard: list[str] = []
    holder = HeldUntilReleased(manager)
    with attached(tmp_path / "h.db", manager):
        manager.on_history_changed.insert(0, holder.start)
        manager.on_history_changed.append(heard.append)  # after the store's listener

        async def main() -> None:
            if stop == "cancel":
                raised = await cancelled_while_waiting(manager.aclear_messages(), holder)
                assert isinstance(raised, asyncio.CancelledError)
            else:
                closed_while_waiting(manager.aclear_messages(), holder)

        asyncio.run(main())
    assert len(manager) == 1
    assert stored(tmp_path / "h.db") == records(manager)  # the clear written before the stop was raised
    assert heard == ["clear"]  # listeners never await: every one ran before the stop was raised
    assert lock_is_free(manager)


# -- a store and a Branch on one history: a stop held back by one still lets the other run (review bs) --


def store_and_branch(path: Path, manager: MessageManager, order: str) -> tuple[SQLiteStore, Branch]:
    """A store writing `manager` and a Branch with a view on it, hooked in `order` (whichever is made
    last puts its observer first)."""
    store = SQLiteStore(path)
    if order == "store-then-branch":
        store.attach(manager, "b")
        return store, with_view(manager)
    branch = with_view(manager)
    store.attach(branch, "b")
    return store, branch


@pytest.mark.parametrize("order", ["branch-then-store", "store-then-branch"])
@pytest.mark.parametrize("stop", ["cancel", "close"])
def test_a_stop_while_one_library_hook_waits_still_runs_the_other(tmp_path: Path, order: str, stop: str) -> None:
    manager = MessageManager(system=System(content={"system_message": "rules"}))
    store, branch = store_and_branch(tmp_path / "h.db", manager, order)
    holder = HeldUntilReleased(manager)
    later: list[Any] = []
    manager.on_message_added.insert(0, holder.astart)
    manager.on_message_added.append(later.append)  # a user's observer: it does not run after a stop

    async def main() -> None:
        if stop == "cancel":
            await cancelled_while_waiting(manager.a_add_message(instruction="stopped"), holder)
        else:
            closed_while_waiting(manager.a_add_message(instruction="stopped"), holder)

    with store:
        asyncio.run(main())
    added = list(manager)[-1]
    assert stored(tmp_path / "h.db") == records(manager)
    assert list(branch.progression) == [manager.system.id, added.id]  # type: ignore[union-attr]
    assert later == []
    assert lock_is_free(manager)


@pytest.mark.parametrize("order", ["branch-then-store", "store-then-branch"])
def test_a_close_while_the_first_library_listener_waits_still_runs_the_others(tmp_path: Path, order: str) -> None:
    manager = MessageManager(system=System(content={"system_message": "rules"}))
    manager.add_message(instruction="gone soon")
    store, branch = store_and_branch(tmp_path / "h.db", manager, order)
    branch.progression.append(list(manager)[-1].id)
    holder = HeldUntilReleased(manager)
    manager.on_history_changed.insert(0, holder.start)

    async def main() -> None:
        closed_while_waiting(manager.aclear_messages(), holder)

    with store:
        asyncio.run(main())
    assert stored(tmp_path / "h.db") == records(manager)
    assert list(branch.progression) == [manager.system.id]  # type: ignore[union-attr]


def test_a_cancellation_while_a_users_observer_awaits_still_runs_the_library_hooks_after_it(tmp_path: Path) -> None:
    # The library's hooks put themselves first, but an observer put before them may await: a
    # cancellation there used to skip them, leaving the committed message unwritten and out of the view.
    manager = MessageManager(system=System(content={"system_message": "rules"}))
    store, branch = store_and_branch(tmp_path / "h.db", manager, "branch-then-store")
    started = asyncio.Event()

    async def slow(_: Any) -> None:
        started.set()
        await asyncio.sleep(PATIENCE)

    manager.on_message_added.insert(0, slow)

    async def main() -> None:
        task = asyncio.get_running_loop().create_task(manager.a_add_message(instruction="cut short"))
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    with store:
        asyncio.run(main())
    added = list(manager)[-1]
    assert stored(tmp_path / "h.db") == records(manager)
    assert list(branch.progression) == [manager.system.id, added.id]  # type: ignore[union-attr]


def test_an_interrupt_while_a_library_hook_waits_is_collected_with_the_other_failures(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Review bs: a Ctrl-C in the wait propagated alone: an earlier observer's failure was lost and the
    # later observers skipped. Waiting blocking, before, the hook raised it as its failure.
    manager = MessageManager(system=System(content={"system_message": "rules"}))
    branch = with_view(manager)
    holder = HeldUntilReleased(manager)
    later: list[Any] = []

    def fails(_: Any) -> None:
        raise ValueError("an earlier observer failed")

    async def interrupted(lock: Any, taken: list[bool]) -> None:
        holder.release.set()
        raise KeyboardInterrupt

    monkeypatch.setattr(lockinghooks, "acquire_without_blocking_the_loop", interrupted)
    manager.on_message_added[:0] = [fails, holder.astart]
    manager.on_message_added.append(later.append)
    with pytest.raises(BaseExceptionGroup) as raised:
        asyncio.run(manager.a_add_message(instruction="x"))
    assert [type(error) for error in raised.value.exceptions] == [ValueError, KeyboardInterrupt]
    assert later == [list(manager)[-1]]
    assert list(branch.progression) == [manager.system.id]  # type: ignore[union-attr]  # the hook did not run
    assert lock_is_free(manager)


def test_a_pile_replaced_while_a_library_hook_waits_is_waited_for_without_blocking_the_loop() -> None:
    # Review bs: the lock was read once, before the wait: the hook then took the new pile's lock
    # blocking, on the loop, while another thread held it waiting for that loop.
    manager = MessageManager(system=System(content={"system_message": "rules"}))
    branch = with_view(manager)
    holder = HeldUntilReleased(manager)
    held: list[Message] = []
    manager.on_message_added[:0] = [lambda _: held.extend(manager.messages), holder.start]  # read, then held
    second: list[LockHolder] = []

    async def main() -> None:
        task = asyncio.get_running_loop().create_task(manager.a_add_message(instruction="moved"))
        for _ in range(20):  # into the tracker's wait for the first pile's lock
            await asyncio.sleep(0)
        assert not task.done()
        manager.messages = Pile(held, item_type={Message}, strict_type=False)
        second.append(LockHolder(manager, asyncio.get_running_loop()))
        second[0].start()  # holds the new pile's lock, waiting for this loop
        holder.release.set()
        await task

    asyncio.run(main())
    second[0].thread.join(PATIENCE * 2)
    assert second[0].outcome == ["served"]
    assert list(branch.progression) == [manager.system.id, list(manager)[-1].id]  # type: ignore[union-attr]


class ReplacesThePileThenReleases(HeldUntilReleased):
    """A holder that, told to let go, first gives the history a new pile (a copy of the old one)."""

    def _hold(self) -> None:
        with self.manager.messages.thread_lock:
            self.holding.set()
            self.release.wait(PATIENCE)
            self.manager.messages = Pile(list(self.manager.messages), item_type={Message}, strict_type=False)


def test_a_pile_replaced_while_a_hand_off_thread_waits_is_waited_for_again() -> None:
    # Review bx 3: the hand-off thread waited in the hook's own `with` for the lock of the pile it saw
    # first; the holder then replaced the pile, and the Branch's view tracking ran holding the old lock
    # only, beside other threads' adds to the new pile (the loop's path already waited again).
    manager = MessageManager(system=System(content={"system_message": "rules"}))
    branch = with_view(manager)
    holder = ReplacesThePileThenReleases(manager)
    manager.on_message_added.insert(0, holder.astart)
    holds_the_current_lock: list[bool] = []

    def probe(_: Any) -> None:
        lock = manager.messages.thread_lock
        with lock:  # what a library hook does: the lock it reads, the history's current one if held already
            holds_the_current_lock.append(manager.messages.thread_lock._is_owned())  # type: ignore[attr-defined]

    manager.on_message_added.append(lockinghooks.LockedCall(manager, probe))
    stop = asyncio.run(cancelled_while_waiting(manager.a_add_message(instruction="moved"), holder))
    assert isinstance(stop, asyncio.CancelledError)
    assert holds_the_current_lock == [True]
    assert list(branch.progression) == [manager.system.id, list(manager)[-1].id]  # type: ignore[union-attr]


_LAST_WORDS_AT_EXIT = """
import asyncio, atexit, sys, threading, time
from lionmsg import MessageManager
from lionmsg.store import SQLiteStore

manager = MessageManager()
store = SQLiteStore(sys.argv[1])
store.attach(manager, "b")
manager.add_message(instruction="first")
take, holding = threading.Event(), threading.Event()

def worker():  # a daemon thread that holds the history's lock for a moment when asked
    take.wait()
    with manager.messages.thread_lock:
        holding.set()
        time.sleep(0.3)

threading.Thread(target=worker, daemon=True).start()

def last_words():
    async def main():
        async def slow(_):
            take.set()
            holding.wait()
            await asyncio.sleep(10)
        manager.on_message_added.insert(0, slow)
        try:
            await asyncio.wait_for(manager.a_add_message(instruction="last words"), 0.1)
        except asyncio.TimeoutError:  # the add cancelled while the hooks wait: what this exit is about
            return
    asyncio.run(main())
    store.close()

atexit.register(last_words)
"""


_AFTER_THE_MAIN_THREAD_ENDED = """
import asyncio, threading, time
from lionmsg import Branch, MessageManager, Progression, System

def program():
    while threading.main_thread().is_alive():  # the main module has ended: the interpreter waits for us
        time.sleep(0.01)
    try:
        threading.Thread(target=time.sleep, args=(0,)).start()
        starts = True
        print("threads start")
    except RuntimeError:  # Python 3.12.1 starts none now
        starts = False
        print("no thread starts")
    manager = MessageManager(system=System(content={"system_message": "rules"}))
    branch = Branch(msgs=manager)
    branch.metadata["current_progression"] = Progression(order=[manager.system.id])
    started, outcome = asyncio.Event(), []

    async def slow_webhook(_):
        started.set()
        await asyncio.sleep(5)

    manager.on_message_added.insert(0, slow_webhook)

    async def main():
        loop = asyncio.get_running_loop()
        task = loop.create_task(manager.a_add_message(instruction="cancelled by a thread"))
        await started.wait()

        async def cancel_and_wait():
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                return "task ended cancelled"

        def holder():  # the README's pattern: hold the lock, cancel the add, wait for its end
            with manager.messages.thread_lock:
                try:
                    # Where threads start the cancelled add ends at once: the long wait only guards against a
                    # stalled machine; where none starts the holder must give up for the add to end.
                    wait = 60 if starts else 2
                    outcome.append(asyncio.run_coroutine_threadsafe(cancel_and_wait(), loop).result(wait))
                except Exception as error:
                    outcome.append(f"gave up ({type(error).__name__})")

        ready.append(holder)
        go.set()
        while not done.is_set():
            await asyncio.sleep(0.001)

    asyncio.run(main())
    for thread in __import__("lionmsg.runtime.lockinghooks", fromlist=["x"]).handed_on():
        thread.join(30)
    print(outcome[0])
    print(len(branch.progression) == 2)

ready, go, done = [], threading.Event(), threading.Event()

def holder_thread():  # started while the main thread lives: a thread may not start later (3.12.1)
    go.wait()
    ready[0]()
    done.set()

threading.Thread(target=holder_thread).start()
threading.Thread(target=program).start()
"""


def test_a_hand_off_after_the_main_thread_ended_still_lets_the_cancelled_add_end_at_once(tmp_path: Path) -> None:
    # Review bz 1: the exit check took "the main thread has ended" for an atexit handler: a program whose
    # loop runs in a thread after its main module ended had the hook wait in the cancelled task again,
    # so a thread holding the lock and waiting for the task's end gave up (or hung).
    script = tmp_path / "after_main.py"
    script.write_text(_AFTER_THE_MAIN_THREAD_ENDED)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stderr) == (0, "")
    starts, outcome, tracked = done.stdout.splitlines()
    # Where no thread starts any more the hook can only wait in the call: the holder gives up, then the
    # hook runs once it lets go.
    assert outcome == ("task ended cancelled" if starts == "threads start" else "gave up (TimeoutError)")
    assert tracked == "True"


def test_a_hand_off_while_the_interpreter_exits_is_recorded_before_it_ends(tmp_path: Path) -> None:
    # Review bx 2: a thread started from an atexit handler is joined by nobody (3.12 does not start it),
    # so an add cancelled there left its message out of the store, silently. At exit the hook now
    # waits in the call, as after a close.
    script = tmp_path / "last_words.py"
    script.write_text(_LAST_WORDS_AT_EXIT)
    done = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "h.db")], capture_output=True, text=True, timeout=60
    )
    assert (done.returncode, done.stderr) == (0, "")
    with SQLiteStore(tmp_path / "h.db") as store:
        assert [message.content.instruction for message in store.load("b")] == ["first", "last words"]  # type: ignore[attr-defined]


@pytest.mark.parametrize("stack_kib", [0, 1024], ids=["default stack", "small stack set"])
def test_a_thread_holding_the_lock_can_cancel_an_add_and_wait_for_its_end(tmp_path: Path, stack_kib: int) -> None:
    # Review bu: after a cancellation the library's hooks waited for the lock in the cancelled task, so
    # a thread that held the lock while it waited for that task to end waited for ever (and further
    # cancellations were swallowed). The task now ends at once; a thread runs the hooks once it can.
    # Review bx 1: where the program set `threading.stack_size()` small, the hook waited in the task
    # again; its thread now starts with a deep enough stack, and the program's setting is kept.
    previous = threading.stack_size()
    threading.stack_size(stack_kib * 1024)
    try:
        _cancel_and_wait_holding_the_lock(tmp_path)
        assert threading.stack_size() == stack_kib * 1024
    finally:
        threading.stack_size(previous)


def _cancel_and_wait_holding_the_lock(tmp_path: Path) -> None:
    manager = MessageManager(system=System(content={"system_message": "rules"}))
    store, branch = store_and_branch(tmp_path / "h.db", manager, "branch-then-store")
    outcome: list[str] = []
    started = asyncio.Event()

    async def slow_webhook(_: Any) -> None:
        started.set()
        await asyncio.sleep(PATIENCE)

    manager.on_message_added.insert(0, slow_webhook)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        task = loop.create_task(manager.a_add_message(instruction="cancelled by a thread"))
        await started.wait()

        async def cancel_and_wait() -> str:
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                return "task ended cancelled"
            return "task ended"

        def worker() -> None:
            with manager.messages.thread_lock:
                try:
                    outcome.append(asyncio.run_coroutine_threadsafe(cancel_and_wait(), loop).result(PATIENCE))
                except Exception as error:
                    outcome.append(f"gave up ({type(error).__name__})")

        thread = threading.Thread(target=worker)
        thread.start()
        while thread.is_alive():
            await asyncio.sleep(0.001)
        hooks_handed_on_done()

    with store:
        asyncio.run(main())
    assert outcome == ["task ended cancelled"]
    added = list(manager)[-1]
    assert list(branch.progression) == [manager.system.id, added.id]  # type: ignore[union-attr]
    assert stored(tmp_path / "h.db") == records(manager)


def test_a_library_hook_failing_after_a_users_observer_stopped_the_add_leaves_a_chain_with_an_end(
    tmp_path: Path,
) -> None:
    # Review bu: run while the stop was handled, the hook's failure had the stop as its context, and put
    # at the end of the stop's chain it made the chain a loop.
    manager = MessageManager(system=System(content={"system_message": "rules"}))
    started = asyncio.Event()

    async def slow(_: Any) -> None:
        started.set()
        await asyncio.sleep(PATIENCE)

    with attached(tmp_path / "h.db", manager):
        with SQLiteStore(tmp_path / "h.db") as other:  # takes the branch over: the next write fails
            other.attach(MessageManager(), "b")
        manager.on_message_added.insert(0, slow)

        async def main() -> BaseException:
            task = asyncio.get_running_loop().create_task(manager.a_add_message(instruction="x"))
            await started.wait()
            task.cancel()
            with pytest.raises(asyncio.CancelledError) as stopped:
                await task
            return stopped.value

        stop = asyncio.run(main())
    chain, seen = [stop], {id(stop)}
    while chain[-1].__context__ is not None:
        assert id(chain[-1].__context__) not in seen, [type(link).__name__ for link in chain]
        chain.append(chain[-1].__context__)
        seen.add(id(chain[-1]))
    assert isinstance(chain[-1], BranchTakenOverError)


def test_a_hook_handed_on_while_asyncio_run_shuts_down_still_runs(tmp_path: Path) -> None:
    # Review bv: handed to a task of the loop, a hook cancelled by asyncio.run's own shutdown (a task still
    # adding when main returned) was left pending when the loop closed: the view never named the message.
    manager = MessageManager(system=System(content={"system_message": "rules"}))
    store, branch = store_and_branch(tmp_path / "h.db", manager, "branch-then-store")
    holder = HeldUntilReleased(manager)
    manager.on_message_added.insert(0, holder.astart)

    async def main() -> None:
        asyncio.get_running_loop().create_task(manager.a_add_message(instruction="left running"))
        for _ in range(20):  # into the first library hook's wait; main then returns, and the shutdown
            await asyncio.sleep(0)  # cancels the add
        threading.Timer(0.05, holder.release.set).start()

    with store:
        asyncio.run(main())
        hooks_handed_on_done()
        assert stored(tmp_path / "h.db") == records(manager)
    added = list(manager)[-1]
    assert list(branch.progression) == [manager.system.id, added.id]  # type: ignore[union-attr]


def test_a_hand_off_whose_thread_cannot_start_is_the_hooks_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Review bw: Thread.start() raising ("can't start new thread") replaced the cancellation with a
    # RuntimeError and left a thread that never ran listed by handed_on() for good.
    manager = MessageManager(system=System(content={"system_message": "rules"}))
    with_view(manager)
    holder = HeldUntilReleased(manager)
    manager.on_message_added.insert(0, holder.astart)
    start = threading.Thread.start

    def refusing(thread: threading.Thread) -> None:
        if thread.name.startswith("lionmsg:"):
            raise RuntimeError("can't start new thread")
        start(thread)

    monkeypatch.setattr(threading.Thread, "start", refusing)
    stop = asyncio.run(cancelled_while_waiting(manager.a_add_message(instruction="x"), holder))
    assert isinstance(stop, asyncio.CancelledError)  # still the cancellation, the failure in its chain
    chain = [stop]
    while chain[-1].__context__ is not None:
        chain.append(chain[-1].__context__)
    assert str(chain[-1]) == "can't start new thread"
    assert lockinghooks.handed_on() == []


class _Unprintable:
    def __repr__(self) -> str:
        raise RuntimeError("no repr")


def test_a_hand_off_does_not_spell_the_hook(tmp_path: Path) -> None:
    # Review bw: the thread was named for the hook's repr: a Branch's holds its metadata, whose repr may
    # raise (or run to megabytes): the cancellation became that error and the view missed the message.
    manager = MessageManager(system=System(content={"system_message": "rules"}))
    branch = with_view(manager)
    branch.metadata["odd"] = _Unprintable()
    holder = HeldUntilReleased(manager)
    manager.on_message_added.insert(0, holder.astart)
    stop = asyncio.run(cancelled_while_waiting(manager.a_add_message(instruction="x"), holder))
    assert isinstance(stop, asyncio.CancelledError)
    assert list(branch.progression) == [manager.system.id, list(manager)[-1].id]  # type: ignore[union-attr]
