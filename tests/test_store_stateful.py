"""The store as a state machine (issue 8, acceptance 1): random sequences of adds, replaces at the same
index, system sets and replacements, clears, async adds, explicit-None routing and store restarts on
two branches of one file; after every step each branch reloads as exactly its manager's history."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Any
from uuid import UUID

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from lionmsg import (
    ActionRequest,
    ActionResponse,
    AssistantResponse,
    Instruction,
    Message,
    MessageManager,
    MessageRole,
    System,
)
from lionmsg.store import SQLiteStore
from tests.store_helpers import assert_same_history

BRANCHES = ("a", "b")
REPLACEABLE = (Instruction, AssistantResponse, ActionRequest)

branches = st.sampled_from(BRANCHES)
texts = st.text(min_size=1, max_size=8)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=6,
)
addresses = st.sampled_from(
    ["alice", "", "user", MessageRole.ASSISTANT, UUID("12345678-1234-4234-8234-123456789abc"), None]
)
metadata = st.none() | st.dictionaries(st.sampled_from(["tag", "turn"]), json_values, min_size=1, max_size=2)


class StoreMachine(RuleBasedStateMachine):
    """Two histories attached to one store file; the model is the managers themselves."""

    def __init__(self) -> None:
        super().__init__()
        self.directory = tempfile.TemporaryDirectory()
        self.path = Path(self.directory.name) / "store.db"
        self.store = SQLiteStore(self.path)
        self.managers = {name: MessageManager() for name in BRANCHES}
        for name, manager in self.managers.items():
            self.store.attach(manager, name)

    def teardown(self) -> None:
        self.store.close()
        self.directory.cleanup()

    def existing(self, name: str, *kinds: type[Message]) -> list[Message]:
        return [message for message in self.managers[name] if type(message) in kinds]

    # -- adds -------------------------------------------------------------------------------------

    @rule(name=branches, text=texts, guidance=st.none() | texts, context=st.none() | json_values, meta=metadata)
    def add_instruction(self, name: str, text: str, guidance: str | None, context: Any, meta: Any) -> None:
        self.managers[name].add_message(instruction=text, guidance=guidance, context=context, metadata=meta)

    @rule(name=branches, text=texts, sender=addresses, recipient=addresses)
    def add_with_explicit_routing(self, name: str, text: str, sender: Any, recipient: Any) -> None:
        # Built first so that None stays an explicit broadcast (add_message reads None as "not given").
        message = Instruction(content={"instruction": text}, sender=sender, recipient=recipient)
        self.managers[name].add_message(instruction=message)

    @rule(name=branches, text=texts, shape=st.sampled_from(["text", "openai"]))
    def add_assistant_response(self, name: str, text: str, shape: str) -> None:
        response = text if shape == "text" else {"choices": [{"message": {"content": text}}]}
        self.managers[name].add_message(assistant_response=response)

    @rule(name=branches, function=texts, arguments=st.dictionaries(texts, json_values, max_size=2), output=json_values)
    def add_action_pair(self, name: str, function: str, arguments: dict[str, Any], output: Any) -> None:
        manager = self.managers[name]
        request = manager.add_message(action_function=function, action_arguments=arguments)
        if output is not None:
            manager.add_message(action_request=request, action_output=output)  # links the request in place

    @rule(name=branches, text=texts)
    def add_async(self, name: str, text: str) -> None:
        asyncio.run(self.managers[name].a_add_message(instruction=text))

    # -- replaces at the same index ---------------------------------------------------------------

    @precondition(lambda self: any(self.existing(n, *REPLACEABLE) for n in BRANCHES))
    @rule(data=st.data(), guidance=texts, sender=addresses.filter(lambda value: value is not None))
    def replace(self, data: st.DataObject, guidance: str, sender: Any) -> None:
        name = data.draw(st.sampled_from([n for n in BRANCHES if self.existing(n, *REPLACEABLE)]))
        manager = self.managers[name]
        target = data.draw(st.sampled_from(self.existing(name, *REPLACEABLE)))
        index = manager.progression.index(target.id)
        if isinstance(target, Instruction):
            manager.add_message(instruction=target, guidance=guidance, sender=sender)
        elif isinstance(target, AssistantResponse):
            manager.add_message(assistant_response=target, sender=sender)
        else:
            manager.add_message(action_request=target, action_arguments={"changed": guidance})
        assert manager.progression.index(target.id) == index

    @precondition(lambda self: any(self.existing(n, ActionResponse) for n in BRANCHES))
    @rule(data=st.data(), output=json_values.filter(lambda value: value is not None))
    def replace_action_response(self, data: st.DataObject, output: Any) -> None:
        name = data.draw(st.sampled_from([n for n in BRANCHES if self.existing(n, ActionResponse)]))
        manager = self.managers[name]
        response = data.draw(st.sampled_from(self.existing(name, ActionResponse)))
        request = manager.messages.get(response.content.action_request_id)
        if isinstance(request, ActionRequest):
            manager.add_message(action_request=request, action_response=response, action_output=output)

    # -- the system message and clearing ----------------------------------------------------------

    @rule(name=branches, text=texts, how=st.sampled_from(["set_system", "add_message"]))
    def new_system(self, name: str, text: str, how: str) -> None:
        manager = self.managers[name]
        if how == "set_system":
            manager.set_system(System(content={"system_message": text}))
        else:
            manager.add_message(system=text)

    @precondition(lambda self: any(self.managers[n].system is not None for n in BRANCHES))
    @rule(data=st.data(), text=texts)
    def update_current_system(self, data: st.DataObject, text: str) -> None:
        name = data.draw(st.sampled_from([n for n in BRANCHES if self.managers[n].system is not None]))
        manager = self.managers[name]
        current = manager.system
        assert current is not None
        current.content.system_message = text
        manager.set_system(current)  # the current one again: updated in place

    @rule(name=branches, asynchronous=st.booleans())
    def clear(self, name: str, asynchronous: bool) -> None:
        manager = self.managers[name]
        if asynchronous:
            asyncio.run(manager.aclear_messages())
        else:
            manager.clear_messages()

    # -- restarting -------------------------------------------------------------------------------

    @rule()
    def restart(self) -> None:
        """Close the store, reopen the file, continue each branch from what it loads."""
        self.store.close()
        self.store = SQLiteStore(self.path)
        for name, manager in list(self.managers.items()):
            loaded = self.store.load(name)
            assert_same_history(loaded, manager)
            self.store.attach(loaded, name)
            self.managers[name] = loaded

    # -- the property -----------------------------------------------------------------------------

    @invariant()
    def every_branch_reloads_as_its_history(self) -> None:
        assert self.store.branches() == list(BRANCHES)
        for name, manager in self.managers.items():
            assert_same_history(self.store.load(name), manager)


StoreMachine.TestCase.settings = settings(max_examples=30, stateful_step_count=25, deadline=None)
test_store_machine = StoreMachine.TestCase
