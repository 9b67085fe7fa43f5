"""A first look at lionmsg: build typed messages, route them, and round-trip their records."""

from __future__ import annotations

import json

from lionmsg import ActionRequest, ActionResponse, AssistantResponse, Instruction, Message, System


def main() -> None:
    system = System(content={"system_message": "You are a terse assistant."})
    ask = Instruction(content={"instruction": "What is 2 + 2?", "guidance": "Answer with a number."})
    answer = AssistantResponse(content={"assistant_response": "4"})
    call = ActionRequest(content={"function": "add", "arguments": {"a": 2, "b": 2}})
    result = ActionResponse(
        content={"function": "add", "arguments": {"a": 2, "b": 2}, "output": 4, "action_request_id": str(call.id)}
    )
    call.update(action_response_id=str(result.id))

    history = [system, ask, answer, call, result]
    print(f"{'class':<18} {'role':<10} {'sender':<10} {'recipient':<10}")
    for message in history:
        sender, recipient = message.to_dict()["sender"], message.to_dict()["recipient"]
        print(f"{type(message).__name__:<18} {message.role.value:<10} {sender!s:<10} {recipient!s:<10}")

    records = [json.loads(message.to_json()) for message in history]
    reloaded = [Message.from_dict(record) for record in records]
    assert [type(m) for m in reloaded] == [type(m) for m in history]
    assert all(a.to_dict() == b.to_dict() for a, b in zip(history, reloaded, strict=True))
    print(f"\n{len(records)} records written and reloaded into the same classes; one of them:")
    print(json.dumps(records[3], indent=2))


if __name__ == "__main__":
    main()
