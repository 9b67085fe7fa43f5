"""MessageManager as a state machine (ADR-0006 D3, design.md §6): random sequences of adds, replaces,
system changes, clears and rejected inputs against a model of the history, with the history's
invariants checked after every step."""

from __future__ import annotations

from typing import Any
from uuid import UUID

import pytest
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

ONE_KIND = r"^Only one message type can be added at a time\.$"
NO_REQUEST = r"^Error: please provide a corresponding action request for an action response\.$"
NOT_A_SYSTEM = r"^System message must be a System instance\.$"
ROUTED = {"sender": "carol", "recipient": "dave"}  # valid routing, never used by a successful add

ROLES = {
    System: "system",
    Instruction: "user",
    AssistantResponse: "assistant",
    ActionRequest: "action",
    ActionResponse: "action",
}

# -- strategies -----------------------------------------------------------------------------------

texts = st.text(min_size=1, max_size=12)
json_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text()
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)
# An action output: any JSON value but None (None means "no output given"), falsy ones included.
outputs = st.sampled_from([0, "", [], {}, False, 0.0]) | json_values.filter(lambda value: value is not None)
arguments = st.dictionaries(st.text(min_size=1, max_size=5), json_values, max_size=3)
tool_schemas = st.lists(
    st.builds(lambda name: {"name": name, "parameters": {"type": "object"}}, texts), min_size=1, max_size=2
)
images = st.lists(
    st.sampled_from(["https://example.com/a.png", "http://img.test/b.jpg", "data:image/png;base64,AAAA", "AAAA"]),
    min_size=1,
    max_size=2,
)
# (given, normalised) sender/recipient pairs.
addresses = st.sampled_from(
    [
        ("alice", "alice"),
        ("bot", "bot"),
        ("user", MessageRole.USER),
        (MessageRole.ASSISTANT, MessageRole.ASSISTANT),
        ("12345678-1234-4234-8234-123456789abc", UUID("12345678-1234-4234-8234-123456789abc")),
    ]
)
metadata = st.none() | st.dictionaries(st.sampled_from(["tag", "turn", "note"]), st.integers(0, 9), min_size=1)


def provider_payload(text: str, shape: str) -> Any:
    if shape == "openai":
        return {"choices": [{"message": {"content": text}}]}
    if shape == "blocks":
        return {"content": [{"type": "text", "text": text}]}
    return {"content": text}


KINDS = {
    System: "system",
    Instruction: "instruction",
    AssistantResponse: "assistant_response",
    ActionRequest: "action_request",
}


def kind_argument(message: Message) -> str:
    """The add_message keyword that takes an existing message of this kind."""
    return KINDS[type(message)]


class ManagerMachine(RuleBasedStateMachine):
    """One MessageManager and a model: the expected order, the expected object behind each id, which
    id is the system, and the request <-> response pairs made through the manager."""

    def __init__(self) -> None:
        super().__init__()
        self.mm = MessageManager()
        self.order: list[UUID] = []
        self.system_id: UUID | None = None
        # The object expected in the history for an id; kept after a clear (for re-adding, link checks).
        self.known: dict[UUID, Message] = {}
        self.request_of: dict[UUID, UUID] = {}  # response id -> request id
        self.latest_response: dict[UUID, UUID] = {}  # request id -> id of its newest response

    # -- helpers -----------------------------------------------------------------------------------

    def present(self, *kinds: type[Message]) -> list[Message]:
        return [self.known[ident] for ident in self.order if type(self.known[ident]) in kinds]

    def appended(self, message: Message, kind: type[Message]) -> None:
        assert type(message) is kind
        assert message.id not in self.order
        self.order.append(message.id)
        self.known[message.id] = message

    def kept_in_place(self, message: Message, returned: Message, index: int) -> None:
        assert returned is message
        assert self.mm.progression.index(message.id) == index
        assert self.mm.messages[message.id] is message

    def snapshot(self) -> tuple[Any, ...]:
        pile = list(self.mm.messages)
        return (
            list(self.mm.progression),
            {message.id: id(message) for message in pile},
            [(message.content.to_dict(), message.to_dict()) for message in pile],
            id(self.mm.system),
            None if self.mm.system is None else self.mm.system.to_dict(),
            {ident: message.to_dict() for ident, message in self.known.items()},
        )

    def rejected(
        self, error: type[Exception], match: str | None, call: Any, /, *positional: Any, **arguments: Any
    ) -> None:
        before = self.snapshot()
        with pytest.raises(error, match=match):
            call(*positional, **arguments)
        assert self.snapshot() == before

    def removed(self) -> list[Message]:
        """Messages that left the history (cleared, or a replaced system) and can be added again."""
        order = set(self.order)
        return [message for ident, message in self.known.items() if ident not in order and type(message) in KINDS]

    def set_model_system(self, system: System) -> None:
        if self.system_id is None:
            self.order.insert(0, system.id)
        else:
            assert self.order[0] == self.system_id
            self.order[0] = system.id
        self.system_id = system.id
        self.known[system.id] = system

    # -- adding ------------------------------------------------------------------------------------

    @rule(
        text=st.none() | texts,
        context=st.none() | json_values | st.lists(json_values, min_size=1, max_size=2),
        guidance=st.none() | texts,
        schemas=st.none() | tool_schemas,
        pictures=st.none() | images,
        detail=st.sampled_from([None, "low", "high", "auto"]),
        meta=metadata,
    )
    def add_instruction(
        self,
        text: str | None,
        context: Any,
        guidance: str | None,
        schemas: list[dict[str, Any]] | None,
        pictures: list[str] | None,
        detail: str | None,
        meta: dict[str, int] | None,
    ) -> None:
        message = self.mm.add_message(
            instruction=text,
            context=context,
            guidance=guidance,
            tool_schemas=schemas,
            images=pictures,
            image_detail=detail if pictures else None,
            metadata=meta,
        )
        self.appended(message, Instruction)
        content = message.content
        assert content.instruction == text
        assert content.guidance == guidance
        if context is not None:  # a falsy context (0, "", {}) is a value too: wrapped, not dropped
            assert content.prompt_context == (context if isinstance(context, list) else [context])
        assert content.tool_schemas == (schemas or [])
        assert content.images == (pictures or [])
        if pictures:
            assert content.image_detail == (detail or "auto")
        assert message.metadata.get("extra", {}).items() >= (meta or {}).items()
        assert (message.sender, message.recipient) == (MessageRole.UNSET, MessageRole.UNSET)

    @rule(text=texts, shape=st.sampled_from(["text", "openai", "blocks", "content"]), sender=st.none() | addresses)
    def add_assistant_response(self, text: str, shape: str, sender: tuple[Any, Any] | None) -> None:
        given = text if shape == "text" else provider_payload(text, shape)
        message = self.mm.add_message(assistant_response=given, sender=None if sender is None else sender[0])
        self.appended(message, AssistantResponse)
        assert message.rendered == text
        if shape != "text":
            assert message.metadata["model_response"] == given
        assert message.sender == (MessageRole.UNSET if sender is None else sender[1])
        assert message.recipient == MessageRole.USER

    @rule(function=texts, args=st.none() | arguments)
    def add_action_request(self, function: str, args: dict[str, Any] | None) -> None:
        message = self.mm.add_message(action_function=function, action_arguments=args)
        self.appended(message, ActionRequest)
        assert (message.function, message.arguments) == (function, args or {})
        assert message.content.action_response_id is None

    @precondition(lambda self: bool(self.present(ActionRequest)))
    @rule(data=st.data(), output=outputs)
    def add_action_response(self, data: st.DataObject, output: Any) -> None:
        request = data.draw(st.sampled_from(self.present(ActionRequest)), label="request")
        assert isinstance(request, ActionRequest)
        request_index = self.mm.progression.index(request.id)
        response = self.mm.add_message(action_request=request, action_output=output)
        self.appended(response, ActionResponse)
        assert response.output == output
        assert type(response.output) is type(output)
        assert (response.function, response.arguments) == (request.function, request.arguments)
        assert self.mm.progression.index(request.id) == request_index
        self.request_of[response.id] = request.id
        self.latest_response[request.id] = response.id

    @precondition(lambda self: bool(self.order))
    @rule(data=st.data(), sender=addresses, recipient=addresses)
    def route_existing(self, data: st.DataObject, sender: tuple[Any, Any], recipient: tuple[Any, Any]) -> None:
        """Generic routing: an existing message of any kind, re-added with a new sender and recipient."""
        message = data.draw(st.sampled_from([self.known[ident] for ident in self.order]), label="message")
        index = self.order.index(message.id)
        content = message.content.to_dict()
        if isinstance(message, ActionResponse):
            request = self.known[self.request_of[message.id]]
            returned = self.mm.add_message(
                action_request=request, action_response=message, sender=sender[0], recipient=recipient[0]
            )
        else:
            returned = self.mm.add_message(
                **{kind_argument(message): message}, sender=sender[0], recipient=recipient[0]
            )
        self.kept_in_place(message, returned, index)
        assert (message.sender, message.recipient) == (sender[1], recipient[1])
        assert message.content.to_dict() == content
        if isinstance(message, System):
            assert self.mm.system is message

    @precondition(lambda self: bool(self.removed()))
    @rule(data=st.data())
    def re_add_a_removed_message(self, data: st.DataObject) -> None:
        """A message that left the history comes back as the same object: at the end, or a former
        system at index 0 in place of the current one."""
        message = data.draw(st.sampled_from(self.removed()), label="removed")
        returned = self.mm.add_message(**{kind_argument(message): message})
        assert returned is message
        if isinstance(message, System):
            self.set_model_system(message)
            assert self.mm.system is message
        else:
            self.order.append(message.id)

    # -- replacing ---------------------------------------------------------------------------------

    @precondition(lambda self: bool(self.present(Instruction)))
    @rule(data=st.data(), guidance=texts, context=st.none() | json_values)
    def replace_instruction(self, data: st.DataObject, guidance: str, context: Any) -> None:
        instruction = data.draw(st.sampled_from(self.present(Instruction)), label="instruction")
        assert isinstance(instruction, Instruction)
        index = self.order.index(instruction.id)
        before = instruction.content.to_dict()
        returned = self.mm.add_message(instruction=instruction, guidance=guidance, context=context)
        self.kept_in_place(instruction, returned, index)
        assert instruction.content.guidance == guidance
        assert instruction.content.instruction == before.get("instruction")
        added = [] if context is None else context if isinstance(context, list) else [context]  # extend: the default
        assert instruction.content.prompt_context == [*before.get("prompt_context", []), *added]

    @precondition(lambda self: bool(self.present(ActionRequest)))
    @rule(data=st.data(), args=arguments.filter(bool))
    def replace_action_request(self, data: st.DataObject, args: dict[str, Any]) -> None:
        request = data.draw(st.sampled_from(self.present(ActionRequest)), label="request")
        assert isinstance(request, ActionRequest)
        index = self.order.index(request.id)
        function, link = request.function, request.content.action_response_id
        returned = self.mm.add_message(action_request=request, action_arguments=args)
        self.kept_in_place(request, returned, index)
        assert (request.function, request.arguments) == (function, args)
        assert request.content.action_response_id == link

    @precondition(lambda self: bool(self.order))
    @rule(data=st.data(), twin=st.booleans())
    def pile_update(self, data: st.DataObject, twin: bool) -> None:
        """messages.update of a present message (or of a copy with its id) keeps its index."""
        message = data.draw(st.sampled_from([self.known[ident] for ident in self.order]), label="message")
        index = self.order.index(message.id)
        # The system is the manager's own object: only itself is re-put at the pile level.
        replacement = Message.from_dict(message.to_dict()) if twin and not isinstance(message, System) else message
        assert type(replacement) is type(message)
        self.mm.messages.update(replacement)
        assert self.mm.progression.index(message.id) == index
        assert self.mm.messages[message.id] is replacement
        self.known[message.id] = replacement

    # -- the system --------------------------------------------------------------------------------

    @rule(text=texts, meta=metadata)
    def add_system_text(self, text: str, meta: dict[str, int] | None) -> None:
        old = self.mm.system
        system = self.mm.add_message(system=text, metadata=meta)
        assert type(system) is System
        assert system is not old
        assert system.content.system_message == text
        assert (system.sender, system.recipient) == (MessageRole.SYSTEM, MessageRole.ASSISTANT)
        self.set_model_system(system)  # type: ignore[arg-type]
        if old is not None:
            assert old.id not in self.mm

    @rule(text=texts)
    def set_new_system(self, text: str) -> None:
        old = self.mm.system
        system = System(content={"system_message": text})
        self.mm.set_system(system)
        self.set_model_system(system)
        if old is not None:
            assert old.id not in self.mm

    @precondition(lambda self: self.system_id is not None)
    @rule()
    def set_the_current_system(self) -> None:
        system = self.mm.system
        assert system is not None
        before = system.to_dict()
        self.mm.set_system(system)  # never raises: an update in place
        assert self.mm.system is system
        assert system.to_dict() == before

    @precondition(lambda self: self.system_id is not None)
    @rule(stamp=st.sampled_from(["2025-01-01T00:00+00:00", "yesterday", "1999-12-31T23:59Z"]))
    def re_add_the_current_system_with_a_time(self, stamp: str) -> None:
        system = self.mm.system
        assert system is not None
        message = system.content.system_message
        returned = self.mm.add_message(system=system, system_datetime=stamp)
        self.kept_in_place(system, returned, 0)
        assert self.mm.system is system
        assert system.content.system_datetime == stamp
        assert system.content.system_message == message
        assert system.rendered == f"System Time: {stamp}\n\n{message}"

    @rule()
    def clear(self) -> None:
        self.mm.clear_messages()
        self.order = [] if self.system_id is None else [self.system_id]

    # -- rejected inputs: each raises its documented exception and changes nothing -----------------

    @rule(output=outputs)
    def reject_conflicting_kinds(self, output: Any) -> None:
        add = self.mm.add_message
        self.rejected(ValueError, ONE_KIND, add, instruction="i", assistant_response="a")
        for request in self.present(ActionRequest)[:2] or [ActionRequest(content={"function": "f"})]:
            self.rejected(ValueError, ONE_KIND, add, instruction="i", action_request=request, action_output=output)
            self.rejected(ValueError, ONE_KIND, add, system="s", action_request=request)
        for instruction in self.present(Instruction)[:1]:
            self.rejected(ValueError, ONE_KIND, add, instruction=instruction, assistant_response="a")

    @rule()
    def reject_a_stray_argument(self) -> None:
        add = self.mm.add_message
        stray = r"^guidance cannot be used when adding a message of kind 'assistant_response'$"
        self.rejected(ValueError, stray, add, assistant_response="a", guidance="g")
        for response in self.present(AssistantResponse)[:1]:
            self.rejected(ValueError, stray, add, assistant_response=response, guidance="g")

    @rule(output=outputs)
    def reject_an_output_without_a_request(self, output: Any) -> None:
        self.rejected(ValueError, NO_REQUEST, self.mm.add_message, action_output=output)
        self.rejected(
            ValueError, NO_REQUEST, self.mm.add_message, action_output=output, action_request={"function": "f"}
        )

    @rule(bad=st.sampled_from(["file:///etc/passwd", "ftp://host/x.png", "data:text/plain;base64,AAAA", "not base64!"]))
    def reject_a_bad_image(self, bad: str) -> None:
        self.rejected(ValueError, "image", self.mm.add_message, instruction="look", images=[bad])
        for instruction in self.present(Instruction)[:1]:
            self.rejected(ValueError, "image", self.mm.add_message, instruction=instruction, images=[bad])
            # valid routing with invalid content: the routing must not be applied either
            self.rejected(ValueError, "image", self.mm.add_message, instruction=instruction, images=[bad], **ROUTED)

    @rule(detail=st.sampled_from(["ultra", "LOW", "medium"]))
    def reject_a_bad_image_detail(self, detail: str) -> None:
        add = self.mm.add_message
        self.rejected(
            ValueError,
            "image_detail",
            add,
            instruction="look",
            images=["https://example.com/a.png"],
            image_detail=detail,
        )
        for instruction in self.present(Instruction)[:1]:
            self.rejected(ValueError, "image_detail", add, instruction=instruction, image_detail=detail)
            self.rejected(ValueError, "image_detail", add, instruction=instruction, image_detail=detail, **ROUTED)

    @rule()
    def reject_a_non_system_as_system(self) -> None:
        self.rejected(ValueError, NOT_A_SYSTEM, self.mm.set_system, Instruction(content={"instruction": "x"}))
        for message in self.present(Instruction, AssistantResponse, ActionRequest, ActionResponse)[:1]:
            self.rejected(ValueError, NOT_A_SYSTEM, self.mm.set_system, message)

    @rule()
    def reject_a_bad_handle_context(self) -> None:
        add = self.mm.add_message
        match = r"^handle_context must be either 'extend' or 'replace'$"
        self.rejected(ValueError, match, add, instruction="i", context=["c"], handle_context="bogus")
        for instruction in self.present(Instruction)[:1]:
            self.rejected(ValueError, match, add, instruction=instruction, context=["c"], handle_context="bogus")
            self.rejected(
                ValueError, match, add, instruction=instruction, context=["c"], handle_context="bogus", **ROUTED
            )

    @rule(where=st.sampled_from(["sender", "recipient"]), bad=st.sampled_from([123, 1.5, object()]))
    def reject_an_invalid_address(self, where: str, bad: Any) -> None:
        invalid = "Invalid sender or recipient"
        for fresh in ({"instruction": "i"}, {"assistant_response": "a"}, {"action_function": "f"}, {"system": "s"}):
            self.rejected(ValueError, invalid, self.mm.add_message, **fresh, **{where: bad})
        for message in self.present(System, Instruction, AssistantResponse, ActionRequest)[:2]:
            self.rejected(ValueError, invalid, self.mm.add_message, **{kind_argument(message): message, where: bad})

    # -- invariants --------------------------------------------------------------------------------

    @invariant()
    def progression_and_pile_hold_the_same_ids(self) -> None:
        order = list(self.mm.progression)
        assert len(order) == len(set(order)) == len(self.mm.messages) == len(self.mm)
        assert all(ident in self.mm.messages for ident in order)
        assert [message.id for message in self.mm] == order

    @invariant()
    def the_model_order_and_objects_match(self) -> None:
        assert list(self.mm.progression) == self.order
        for ident in self.order:
            assert self.mm.messages[ident] is self.known[ident]

    @invariant()
    def one_system_at_index_zero(self) -> None:
        systems = [message for message in self.mm if isinstance(message, System)]
        if self.system_id is None:
            assert self.mm.system is None
            assert systems == []
            return
        assert self.mm.system is not None
        assert self.mm.system.id == self.system_id
        assert len(systems) == 1
        assert systems[0] is self.mm.system
        assert self.mm.messages[0] is self.mm.system
        assert self.mm.progression.index(self.system_id) == 0

    @invariant()
    def actions_are_linked_both_ways(self) -> None:
        for response_id, request_id in self.request_of.items():
            response = self.known[response_id]
            assert isinstance(response, ActionResponse)
            assert response.content.action_request_id == str(request_id)
        for request_id, response_id in self.latest_response.items():
            request = self.known[request_id]
            assert isinstance(request, ActionRequest)
            assert request.content.action_response_id == str(response_id)
            assert self.known[response_id].content.action_request_id == str(request.id)

    @invariant()
    def chat_messages_follow_the_history(self) -> None:
        chat = self.mm.to_chat_msgs()
        assert len(chat) == len(self.order)
        assert [entry["role"] for entry in chat] == [ROLES[type(self.known[ident])] for ident in self.order]
        assert [entry["content"] for entry in chat] == [self.known[ident].rendered for ident in self.order]

    @invariant()
    def typed_views_follow_the_history(self) -> None:
        instructions = [ident for ident in self.order if type(self.known[ident]) is Instruction]
        responses = [ident for ident in self.order if type(self.known[ident]) is AssistantResponse]
        assert [message.id for message in self.mm.instructions] == instructions
        assert [message.id for message in self.mm.assistant_responses] == responses
        last_instruction, last_response = self.mm.last_instruction, self.mm.last_response
        assert (None if last_instruction is None else last_instruction.id) == (instructions or [None])[-1]
        assert (None if last_response is None else last_response.id) == (responses or [None])[-1]

    @invariant()
    def the_record_round_trips(self) -> None:
        reloaded = MessageManager.from_dict(self.mm.to_dict())
        assert list(reloaded.progression) == self.order
        assert [type(message) for message in reloaded] == [type(self.known[ident]) for ident in self.order]
        assert [message.to_dict() for message in reloaded] == [self.known[ident].to_dict() for ident in self.order]
        assert (None if reloaded.system is None else reloaded.system.id) == self.system_id


# The active profile ("dev" or "ci": its examples and deadline), each example a sequence of up to 50 steps.
ManagerMachine.TestCase.settings = settings(stateful_step_count=50)
TestManagerMachine = ManagerMachine.TestCase
