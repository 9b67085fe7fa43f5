"""Building one message from `MessageManager.add_message` keyword arguments (ADR-0006 D3, design.md §6.5-6.6).

Exactly one kind is built: an instruction, a system message, an assistant response, an action request,
or an action response (chosen by `action_output is not None` or an `action_response`). Conflicting kinds
raise `ValueError("Only one message type can be added at a time.")`, and an argument that does not apply
to the chosen kind is a `ValueError` too: nothing is silently dropped. With no kind chosen, an
instruction is built. Passing an existing message of the chosen kind updates it instead of building one.
Without `sender`/`recipient`, new messages keep their class defaults. `metadata` (a mapping with
string keys, else a TypeError before anything is built or changed) is merged into the message's
`metadata["extra"]`, as LionAGI does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict

from pydantic import BaseModel

from lionmsg.generated.content import (
    ActionRequestContent,
    ActionResponseContent,
    AssistantResponseContent,
    InstructionContent,
    SystemContent,
)
from lionmsg.generated.messages import (
    ActionRequest,
    ActionResponse,
    AssistantResponse,
    Instruction,
    Message,
    System,
)
from lionmsg.runtime.content.base import owned_copy
from lionmsg.runtime.fastpath import ENVELOPE_CLASSES, MISSING, assemble

__all__ = [
    "AddMessageArguments",
    "build_common",
    "build_message",
    "build_action",
    "build_new_instruction",
    "build_text_reply",
    "create_action_response",
    "revise_instruction",
]


class AddMessageArguments(TypedDict, total=False):
    """The keyword arguments of `MessageManager.add_message` and `a_add_message` (LionAGI's names).

    None means "not given" for every one of them; see the module docstring for how they choose a kind."""

    sender: Any
    recipient: Any
    metadata: dict[str, Any] | None
    instruction: Any
    context: Any
    handle_context: str | None
    guidance: str | None
    plain_content: str | None
    response_format: Any
    images: Any
    image_detail: str | None
    tool_schemas: Any
    system: Any
    system_datetime: Any
    assistant_response: Any
    action_function: Any
    action_arguments: Any
    action_output: Any
    action_request: Any
    action_response: Any


ONE_KIND = "Only one message type can be added at a time."
NO_REQUEST = "Error: please provide a corresponding action request for an action response."

# The arguments each kind takes besides sender, recipient and metadata.
_KIND_ARGUMENTS = {
    "instruction": {
        "instruction", "context", "handle_context", "guidance", "plain_content", "response_format", "images",
        "image_detail", "tool_schemas",
    },
    "system": {"system", "system_datetime"},
    "assistant_response": {"assistant_response"},
    "action_request": {"action_request", "action_function", "action_arguments"},
    "action_response": {"action_request", "action_output", "action_response"},
}  # fmt: skip


def build_message(arguments: dict[str, Any], sender: Any, recipient: Any, metadata: dict[str, Any] | None) -> Message:
    """The one message the arguments describe (see the module docstring); `arguments` (the kind
    arguments, without sender, recipient and metadata) is the caller's to hand over: it is consumed."""
    if metadata is not None and not _is_metadata(metadata):  # first: the builders may update in place
        raise TypeError(f"metadata must be a mapping with string keys, got {metadata!r}")
    kind = _kind(arguments)
    extra_copy = None
    undo = None
    if metadata:
        existing = arguments.get(kind)  # the message it names is the one updated (and returned)
        _check_extra(existing)
        extra_copy = owned_copy(dict(metadata))  # before any builder revises a message: it may refuse
        if isinstance(existing, Message) and type(existing) not in ENVELOPE_CLASSES:
            # A subclass's validators may refuse the merged metadata: asked on a copy first, before the
            # builder revises anything (a request it links, say); a refusal that also depends on what
            # the builder revised comes with the merge, last, and puts the message back as it was.
            existing.model_copy()._merge_extra(extra_copy)
            undo = existing._undo_point()
    given = {
        name: value for name, value in arguments.items() if (value is not None if name in _GIVEN_UNLESS_NONE else value)
    }
    if kind == "action_response" and not isinstance(given.get("action_request"), ActionRequest):
        raise ValueError(NO_REQUEST)  # first: with no request, what else was given is not the problem
    allowed = _KIND_ARGUMENTS[kind]
    if not given.keys() <= allowed:
        stray = sorted(given.keys() - allowed)
        raise ValueError(f"{', '.join(stray)} cannot be used when adding a message of kind {kind!r}")
    routing = {}
    if sender is not None:
        routing["sender"] = sender
    if recipient is not None:
        routing["recipient"] = recipient
    message = _BUILDERS[kind](given, routing)
    if extra_copy is not None:  # LionAGI's place for it: merged into metadata["extra"], the caller's values copied
        try:
            message._merge_extra(extra_copy)
        except BaseException:
            if undo is not None:
                undo()
            raise
    return message


def _check_extra(existing: Any) -> None:
    extra = existing.metadata.get("extra") if isinstance(existing, Message) else None
    if extra is not None and not isinstance(extra, dict):
        raise TypeError(
            f"metadata is merged into the message's metadata['extra'], which is a {type(extra).__name__}, not a dict"
        )


# Given: not None for action_output (falsy results such as 0 or "" still make a response) and for
# context (ADR D2: a scalar becomes a one-element list, 0, False and "" too; a kind that takes no
# context refuses it, as it refuses a truthy one); truthy for every other argument.
_GIVEN_UNLESS_NONE = frozenset({"action_output", "context"})


def _is_metadata(value: Any) -> bool:
    return isinstance(value, Mapping) and all(type(key) is str for key in value)


def build_common(arguments: dict[str, Any]) -> Message | None:
    """What `build_message` makes of the most common calls, built without resolving the kind or
    filtering arguments: a reply's text, a revision of a stored instruction's text, a new instruction
    from its content arguments, a tool call and its result, a reply or an action request given alone
    as a message (which the general road's `update()`, with nothing to change, leaves as it is). None
    for any other arguments (the general road's)."""
    if "assistant_response" in arguments:
        return build_text_reply(arguments)
    if type(arguments.get("instruction")) is Instruction:
        return revise_instruction(arguments)
    built = build_new_instruction(arguments)
    if built is None and ("action_request" in arguments or "action_function" in arguments):
        return build_action(arguments)
    return built


_NEW_MESSAGE_ROUTING = frozenset({"sender", "recipient", "metadata"})
_TEXT_REPLY_ARGUMENTS = _NEW_MESSAGE_ROUTING | {"assistant_response"}


def build_text_reply(arguments: dict[str, Any]) -> Message | None:
    """What `build_message` makes of `assistant_response=<non-empty text>` (the usual way a model's
    reply is recorded) with at most `sender`, `recipient` and `metadata` besides, without resolving the
    kind; None for any other arguments."""
    text = arguments.get("assistant_response")
    if type(text) is not str or not text or not arguments.keys() <= _TEXT_REPLY_ARGUMENTS:
        if type(text) is AssistantResponse and len(arguments) == 1:  # a reply built already: kept as it is
            return text
        return None
    if len(arguments) == 1:
        return assemble(AssistantResponse, AssistantResponseContent(assistant_response=text))  # type: ignore[no-any-return]
    extra = _new_extra(arguments.get("metadata"))
    if extra is MISSING:
        return None
    sender, recipient = arguments.get("sender"), arguments.get("recipient")
    content = AssistantResponseContent(assistant_response=text)
    return assemble(  # type: ignore[no-any-return]
        AssistantResponse, content, MISSING if sender is None else sender, MISSING if recipient is None else recipient,
        MISSING, extra,
    )  # fmt: skip


def _new_extra(metadata: Any) -> Any:
    """`metadata["extra"]` for a new message given `metadata`: the caller's values copied, as
    `build_message` merges them (None when not given: None or empty); MISSING for anything but a dict
    with string keys, whose TypeError the general road raises."""
    if metadata is None:
        return None
    if type(metadata) is not dict or not all(type(key) is str for key in metadata):  # its type before its truth
        return MISSING
    return owned_copy(dict(metadata)) if metadata else None


# What an existing instruction's revision may name besides `instruction` (the message itself): its
# plain text fields, which update() changes without rebuilding the content.
_REVISION_ARGUMENTS = InstructionContent._PLAIN_FIELDS - {"instruction"}


def revise_instruction(arguments: dict[str, Any]) -> Message | None:
    """What `build_message` makes of `instruction=<an Instruction>` with non-empty text for any of its
    plain text fields (`guidance`, `plain_content`) and nothing else (how a history's turn is revised in
    place), without resolving the kind or routing; None for any other arguments."""
    message = arguments.get("instruction")
    if type(message) is not Instruction:
        return None
    changes = {}
    for name, value in arguments.items():
        if name != "instruction":
            if name not in _REVISION_ARGUMENTS or type(value) is not str or not value:
                return None
            changes[name] = value
    if not changes:
        return message  # nothing to revise: update() would leave it as it is
    # What update(**changes) does for them, without its keyword and routing handling.
    while True:  # again when another thread replaced the content meanwhile (see _replace_content)
        content = message.content
        revised = content._with_plain_changes(changes)
        if revised is None:  # a content subclass: the general rebuild
            message.update(**changes)
            return message
        if message._replace_content(content, revised):
            return message


_TEXT_FIELDS = ("instruction", "guidance", "plain_content")
_NEW_INSTRUCTION_ARGUMENTS = frozenset({*_TEXT_FIELDS, "context", *_NEW_MESSAGE_ROUTING})
# The instruction arguments the general content constructor reads (it checks them, as on the general road).
_CONTENT_OPTIONS = frozenset({"handle_context", "response_format", "images", "image_detail", "tool_schemas"})
_EVERY_NEW_INSTRUCTION_ARGUMENT = _NEW_INSTRUCTION_ARGUMENTS | _CONTENT_OPTIONS


def build_new_instruction(arguments: dict[str, Any]) -> Message | None:
    """What `build_message` makes of a new instruction from non-empty text (`instruction`, `guidance`,
    `plain_content`), a `context`, the other content arguments (`images`, `tool_schemas`...),
    `sender`, `recipient` and `metadata` (how a turn is usually added); None for any other arguments
    (text that is not a str, metadata that is not a dict with string keys: the general road's errors).
    Falsy arguments other than `context` mean "not given", as on the general road."""
    keys = arguments.keys()
    options = not keys <= _NEW_INSTRUCTION_ARGUMENTS
    if options and not keys <= _EVERY_NEW_INSTRUCTION_ARGUMENT:
        return None
    get = arguments.get
    texts: dict[str, Any] = {}
    for name in _TEXT_FIELDS:
        value = get(name)
        if value is not None:
            if type(value) is not str or not value:
                return None
            texts[name] = value
    context = get("context")
    if not options:  # declined before anything is copied: the general road copies it all again
        if type(context) is dict:  # one record: the one-item list the general road's _from_input makes of it
            context = [context]
        elif context is not None and (type(context) is not list or not context):
            return None
    extra = None
    if "metadata" in arguments:  # first, as on the general road: its copy may refuse an iterator
        extra = _new_extra(get("metadata"))
        if extra is MISSING:
            return None
    if options:  # the content's general constructor, handed what the general road hands it
        # As there: every argument's truth asked first (an array's may raise), then each copied, in order.
        given = {
            name: value
            for name, value in arguments.items()
            if name not in _NEW_MESSAGE_ROUTING and (value is not None if name == "context" else value)
        }
        content = InstructionContent._from_input({name: owned_copy(value) for name, value in given.items()})
    else:
        plain = InstructionContent._new_with_plain(texts)
        assert plain is not None  # the exact class: it never declines
        if context is not None:
            plain._raw_prompt_context = owned_copy(context)  # the caller's list and what it holds stay the caller's
        content = plain
    sender, recipient = get("sender"), get("recipient")
    return assemble(  # type: ignore[no-any-return]  # by position: keywords cost more on this road
        Instruction, content, MISSING if sender is None else sender, MISSING if recipient is None else recipient,
        MISSING, extra,
    )  # fmt: skip


_NEW_REQUEST_ARGUMENTS = _NEW_MESSAGE_ROUTING | {"action_function", "action_arguments"}
_NEW_RESPONSE_ARGUMENTS = _NEW_MESSAGE_ROUTING | {"action_request", "action_output"}


def build_action(arguments: dict[str, Any]) -> Message | None:
    """What `build_message` makes of a tool call (`action_function` as non-empty text, `action_arguments`
    a dict) or of its result (`action_request` an ActionRequest, `action_output` not None; the request
    is linked to the new response), with at most `sender`, `recipient` and `metadata` besides, without
    resolving the kind; an ActionRequest given alone is kept as it is. None for any other arguments."""
    get = arguments.get
    request = get("action_request")
    if request is None:
        function = get("action_function")
        if type(function) is not str or not function or not arguments.keys() <= _NEW_REQUEST_ARGUMENTS:
            return None
        given = get("action_arguments")
        if given is not None and type(given) is not dict:  # text or a model: the general road's rules
            return None
        extra = _new_extra(get("metadata"))
        if extra is MISSING:
            return None
        content = ActionRequestContent._from_owned({"function": function, "arguments": owned_copy(given or {})})
        sender, recipient = get("sender"), get("recipient")
        return assemble(  # type: ignore[no-any-return]
            ActionRequest, content, MISSING if sender is None else sender,
            MISSING if recipient is None else recipient, MISSING, extra,
        )  # fmt: skip
    if type(request) is not ActionRequest:
        return None
    if len(arguments) == 1:  # built already (as LionAGI's act does): update() would keep it as it is
        return request
    output = get("action_output")
    if output is None or not arguments.keys() <= _NEW_RESPONSE_ARGUMENTS:
        return None
    extra = _new_extra(get("metadata"))
    if extra is MISSING:
        return None
    sender, recipient = get("sender"), get("recipient")
    return _new_action_response(
        request, output, MISSING if sender is None else sender, MISSING if recipient is None else recipient, extra
    )


def _new_action_response(request: ActionRequest, output: Any, sender: Any, recipient: Any, extra: Any) -> Message:
    """A response to `request` holding copies of its call and of `output`, the request then linked to it
    (last: every check has passed by then)."""
    content = ActionResponseContent._from_owned(
        {
            "function": request.function,
            "arguments": owned_copy(request.arguments),
            "output": owned_copy(output),
            "action_request_id": str(request.id),
        }
    )
    response = assemble(ActionResponse, content, sender, recipient, MISSING, extra)
    link = {"action_response_id": str(response.id)}  # canonical text: as _PLAIN_NORMALISERS leave it
    while type(request) is ActionRequest:  # update(**link) without its keyword and routing handling
        held = request.__dict__["content"]
        linked = held._with_plain_changes(link)
        if linked is None:  # a content subclass: the general rebuild
            break
        if request._replace_content(held, linked):  # else another thread replaced it meanwhile: again
            return response  # type: ignore[no-any-return]
    request.update(**link)
    return response  # type: ignore[no-any-return]


def create_action_response(
    *,
    action_request: Any,
    action_output: Any = None,
    action_response: Any = None,
    sender: Any = None,
    recipient: Any = None,
) -> ActionResponse:
    """A new response linked both ways to its request; or an existing response updated (its output
    kept when no new output is given, and no missing link established, as ADR D2 says)."""
    if not isinstance(action_request, ActionRequest):
        raise ValueError(NO_REQUEST)
    routing = {key: value for key, value in (("sender", sender), ("recipient", recipient)) if value is not None}
    if action_response is not None:
        if not isinstance(action_response, ActionResponse):
            raise ValueError(f"action_response must be an ActionResponse, got {type(action_response).__name__}")
        changes = {} if action_output is None else {"output": action_output}
        action_response.update(**routing, **changes)
        return action_response
    return _new_action_response(  # type: ignore[return-value]
        action_request, action_output, routing.get("sender", MISSING), routing.get("recipient", MISSING), None
    )


# The arguments that choose a kind other than an instruction.
_OTHER_KIND_SELECTORS = frozenset(
    {"system", "assistant_response", "action_request", "action_function", "action_output", "action_response"}
)


# Arguments that choose their kind alone when they are the only (truthy) one: a cheap answer for the
# next most common calls, add_message(assistant_response=...) and add_message(system=...).
_SOLE_SELECTORS = {"assistant_response": "assistant_response", "system": "system"}


def _kind(arguments: dict[str, Any]) -> str:
    if arguments.keys().isdisjoint(_OTHER_KIND_SELECTORS):  # the common case: no other kind is in question
        return "instruction"
    if len(arguments) == 1:
        ((name, value),) = arguments.items()
        if value and name in _SOLE_SELECTORS:
            return _SOLE_SELECTORS[name]
    get = arguments.get
    responding = get("action_output") is not None or bool(get("action_response"))
    requesting = bool(get("action_request")) or bool(get("action_function"))
    chosen = None
    for kind, selected in (
        ("instruction", get("instruction")),
        ("system", get("system")),
        ("assistant_response", get("assistant_response")),
        ("action_request", requesting and not responding),
        ("action_response", responding),
    ):
        if selected:
            if chosen is not None:
                raise ValueError(ONE_KIND)
            chosen = kind
    return chosen or "instruction"


def _instruction(given: dict[str, Any], routing: dict[str, Any]) -> Message:
    existing = given.get("instruction")
    if isinstance(existing, Instruction):
        del given["instruction"]
        existing.update(**routing, **given)
        return existing
    # The kind's arguments are all content input names: no check. Their values are the caller's: copied.
    content = InstructionContent._from_input({name: owned_copy(value) for name, value in given.items()})
    return assemble(Instruction, content, **routing)  # type: ignore[no-any-return]


def _system(given: dict[str, Any], routing: dict[str, Any]) -> Message:
    system = given["system"]
    changes = {"system_datetime": given["system_datetime"]} if "system_datetime" in given else {}
    if isinstance(system, System):
        system.update(**routing, **changes)
        return system
    if not isinstance(system, str):
        raise ValueError(f"system must be a System or a string, got {type(system).__name__}")
    # The content and routing checked here, not inside pydantic's validation: their own ValueErrors
    # (as on every other road), not a ValidationError wrapping them.
    return assemble(System, SystemContent.from_dict({"system_message": system, **changes}), **routing)  # type: ignore[no-any-return]


def _assistant_response(given: dict[str, Any], routing: dict[str, Any]) -> Message:
    response = given["assistant_response"]
    if isinstance(response, AssistantResponse):
        response.update(**routing)
        return response
    if isinstance(response, str):
        content = AssistantResponseContent(assistant_response=response)
        return assemble(AssistantResponse, content, **routing)  # type: ignore[no-any-return]
    # A provider payload: normalise it. Another kind of message is none (it would become an empty reply).
    if isinstance(response, (dict, list, BaseModel)) and not isinstance(response, Message):
        return AssistantResponse.from_response(response, **routing)
    shown = f"a message of kind {type(response).__name__}" if isinstance(response, Message) else repr(response)
    raise ValueError(f"assistant_response must be text, a provider response or an AssistantResponse, got {shown}")


def _action_request(given: dict[str, Any], routing: dict[str, Any]) -> Message:
    changes = {
        field: given[argument]
        for argument, field in (("action_function", "function"), ("action_arguments", "arguments"))
        if argument in given
    }
    existing = given.get("action_request")
    if existing is not None:
        if not isinstance(existing, ActionRequest):
            raise ValueError(f"action_request must be an ActionRequest, got {type(existing).__name__}")
        existing.update(**routing, **changes)
        return existing
    return assemble(ActionRequest, ActionRequestContent.from_dict(changes), **routing)  # type: ignore[no-any-return]


def _action_response(given: dict[str, Any], routing: dict[str, Any]) -> Message:
    return create_action_response(
        action_request=given.get("action_request"),
        action_output=given.get("action_output"),
        action_response=given.get("action_response"),
        **routing,
    )


_BUILDERS = {
    "instruction": _instruction,
    "system": _system,
    "assistant_response": _assistant_response,
    "action_request": _action_request,
    "action_response": _action_response,
}
