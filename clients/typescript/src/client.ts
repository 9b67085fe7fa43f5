// A small lionmsg client over the types generated from the schemas (src/generated/lionmsg.ts).
//
// It builds one record of each kind as a typed literal and narrows the `LionRecord` union by
// `metadata.lion_class`. It exists to be compiled with `tsc --strict`: a field missing from the
// generated types, a wrong field type, a role no longer fixed by its kind, or an index signature
// that lets misspelt keys through makes the compile fail (see the `@ts-expect-error` lines, which
// fail the compile when the error they expect is gone).
//
// It needs nothing from Node: scripts/client-records.mjs runs the compiled module (build/client.js)
// and prints the records, so the tests can check that what the types accept the validators accept.

import type {
  ActionRequest,
  ActionRequestContent,
  ActionResponse,
  ActionResponseContent,
  AssistantResponse,
  AssistantResponseContent,
  Envelope,
  Instruction,
  InstructionContent,
  LionRecord,
  Message,
  MessageRole,
  System,
  SystemContent,
} from "./generated/lionmsg.js";
import { DEFAULTS } from "./generated/lionmsg.js";

/** The record kinds by class name: what `metadata.lion_class` names. */
export interface Kinds {
  Message: Message;
  System: System;
  Instruction: Instruction;
  AssistantResponse: AssistantResponse;
  ActionRequest: ActionRequest;
  ActionResponse: ActionResponse;
}
export type Kind = keyof Kinds;

const KIND_NAMES: readonly Kind[] = [
  "Message",
  "System",
  "Instruction",
  "AssistantResponse",
  "ActionRequest",
  "ActionResponse",
];

// Compile-time proof that `Kinds` and the generated union are the same six types, both ways.
type Equals<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
type Assert<T extends true> = T;
export type UnionIsExactlyTheKinds = Assert<Equals<Kinds[Kind], LionRecord>>;
// Each kind's role is fixed by the schema's `const`, narrowed from the envelope's `MessageRole`.
export type RolesAreFixed = Assert<
  Equals<
    { [K in Kind]: NonNullable<Kinds[K]["role"]> },
    {
      Message: "unset";
      System: "system";
      Instruction: "user";
      AssistantResponse: "assistant";
      ActionRequest: "action";
      ActionResponse: "action";
    }
  >
>;
export type RolesAreMessageRoles = Assert<Equals<NonNullable<LionRecord["role"]>, MessageRole>>;
// The wire format's key sets (design.md §5), exactly: a field lost or added by the generator, or an
// index signature that would accept any key, fails here.
export type EnvelopeKeys = Assert<
  Equals<keyof Envelope, "id" | "created_at" | "metadata" | "content" | "embedding" | "sender" | "recipient" | "channel" | "role">
>;
export type ContentKeys = Assert<
  Equals<
    {
      System: keyof SystemContent;
      Instruction: keyof InstructionContent;
      AssistantResponse: keyof AssistantResponseContent;
      ActionRequest: keyof ActionRequestContent;
      ActionResponse: keyof ActionResponseContent;
    },
    {
      System: "system_message" | "system_datetime";
      Instruction:
        | "instruction"
        | "guidance"
        | "prompt_context"
        | "plain_content"
        | "tool_schemas"
        | "response_format"
        | "images"
        | "image_detail";
      AssistantResponse: "assistant_response";
      ActionRequest: "function" | "arguments" | "action_response_id";
      ActionResponse: "function" | "arguments" | "output" | "action_request_id" | "error";
    }
  >
>;
// Null is a value of its own on the wire: an explicit broadcast recipient, a request not yet answered.
export type NullsKept = Assert<
  Equals<
    [Envelope["recipient"], ActionRequestContent["action_response_id"], Message["content"]],
    [string | null | undefined, string | null | undefined, unknown]
  >
>;

/**
 * The kind a record names: the last dotted segment of `metadata.lion_class` (LionAGI writes full
 * paths such as `lionagi.protocols.messages.instruction.Instruction`), the generic Message when it
 * names none. The schema pins the name per kind with a pattern, so the type of `lion_class` is a plain
 * `string`; narrowing therefore goes through this run-time check, as in the Python reader.
 */
export function kindOf(record: LionRecord): Kind {
  const name = record.metadata?.lion_class?.split(".").pop();
  return KIND_NAMES.find((kind) => kind === name) ?? "Message";
}

/** A type guard: `record` is the kind `kind`. */
export function isKind<K extends Kind>(record: LionRecord, kind: K): record is Kinds[K] {
  return kindOf(record) === kind;
}

/** A record tagged with its kind: a discriminated union that a `switch` narrows. */
export type Classified = { [K in Kind]: { kind: K; record: Kinds[K] } }[Kind];

export function classify(record: LionRecord): Classified {
  // One guard per kind, so each branch is checked against its own type (no cast).
  if (isKind(record, "System")) return { kind: "System", record };
  if (isKind(record, "Instruction")) return { kind: "Instruction", record };
  if (isKind(record, "AssistantResponse")) return { kind: "AssistantResponse", record };
  if (isKind(record, "ActionRequest")) return { kind: "ActionRequest", record };
  if (isKind(record, "ActionResponse")) return { kind: "ActionResponse", record };
  return { kind: "Message", record: record as Message }; // the union's remaining member
}

/** One line about a record, reading each kind's own fields after narrowing. */
export function describe(record: LionRecord): string {
  const tagged = classify(record);
  switch (tagged.kind) {
    case "Message":
      return `message ${JSON.stringify(tagged.record.content ?? null)}`;
    case "System":
      // An absent prompt is the schema's default one, as Python reads the record and sends it.
      return `system prompt ${JSON.stringify(tagged.record.content?.system_message ?? DEFAULTS.SystemContent.system_message)}`;
    case "Instruction": {
      const content = tagged.record.content;
      const images = content?.images?.length ?? 0;
      return `instruction ${JSON.stringify(content?.instruction ?? null)} with ${images} image(s)`;
    }
    case "AssistantResponse":
      return `assistant says ${JSON.stringify(tagged.record.content?.assistant_response ?? "")}`;
    case "ActionRequest": {
      const { function: name = "", arguments: args = {}, action_response_id } = tagged.record.content ?? {};
      return `call ${name}(${Object.keys(args).join(", ")}) answered by ${action_response_id ?? "nothing yet"}`;
    }
    case "ActionResponse": {
      const content = tagged.record.content;
      const outcome = content?.error != null ? `failed: ${content.error}` : JSON.stringify(content?.output ?? null);
      return `result of ${content?.function ?? ""} for ${content?.action_request_id ?? "?"}: ${outcome}`;
    }
    default: {
      const unhandled: never = tagged; // a seventh kind in the schemas fails the compile here
      return unhandled;
    }
  }
}

const REQUEST_ID = "00000000-0000-4000-8000-0000000000a1";
const RESPONSE_ID = "00000000-0000-4000-8000-0000000000a2";
const PEER = "11111111-1111-4111-8111-111111111111";
const CREATED_AT = 1735689600.5;

/** One record of each kind, built as typed literals (each checked against its own type). */
export function buildRecords(): LionRecord[] {
  const message: Message = {
    id: "00000000-0000-4000-8000-000000000001",
    created_at: CREATED_AT,
    metadata: { lion_class: "Message", trace: { step: 3 } },
    content: { k: [1, 2], nested: { x: null } }, // any JSON value
    embedding: [0.25, -1.0, 3.0],
    sender: PEER,
    recipient: null, // broadcast
    channel: "ops",
    role: "unset",
  };
  const system: System = {
    id: "00000000-0000-4000-8000-000000000002",
    created_at: CREATED_AT,
    metadata: { lion_class: "System" },
    content: { system_message: "Be terse.", system_datetime: "2025-01-01T00:00+00:00" },
    sender: "system",
    recipient: "assistant",
    role: "system",
  };
  const instruction: Instruction = {
    id: "00000000-0000-4000-8000-000000000003",
    created_at: CREATED_AT,
    metadata: { lion_class: "lionagi.protocols.messages.instruction.Instruction" }, // a full path is accepted
    content: {
      instruction: "Summarise.",
      guidance: "One line.",
      prompt_context: [{ doc: "a" }, "plain", 3],
      tool_schemas: [{ name: "search", parameters: { type: "object" } }],
      response_format: { summary: "string" },
      images: ["data:image/png;base64,iVBORw0KGgo=", "https://example.org/cat.png"],
      image_detail: "low",
    },
    sender: "user",
    recipient: PEER,
    role: "user",
  };
  const assistant: AssistantResponse = {
    id: "00000000-0000-4000-8000-000000000004",
    created_at: CREATED_AT,
    metadata: { lion_class: "AssistantResponse", model_response: { result: "Done." } },
    content: { assistant_response: "Done." },
    sender: PEER,
    recipient: "user",
    role: "assistant",
  };
  const request: ActionRequest = {
    id: REQUEST_ID,
    created_at: CREATED_AT,
    metadata: { lion_class: "ActionRequest" },
    content: { function: "search", arguments: { q: "x", n: 3 }, action_response_id: RESPONSE_ID },
    sender: "assistant",
    recipient: "tools",
    role: "action",
  };
  const response: ActionResponse = {
    id: RESPONSE_ID,
    created_at: CREATED_AT,
    metadata: { lion_class: "ActionResponse" },
    content: { function: "search", arguments: { q: "x", n: 3 }, output: { hits: [1, 2] }, action_request_id: REQUEST_ID },
    sender: "tools",
    recipient: "assistant",
    role: "action",
  };
  return [message, system, instruction, assistant, request, response];
}

// What the types must reject. Each line fails the compile if the generated types stop rejecting it.
export function rejected(): void {
  const base = { id: REQUEST_ID, created_at: CREATED_AT };
  // @ts-expect-error a typed kind requires `metadata.lion_class`
  const noDiscriminator: Instruction = { ...base, metadata: {} };
  // @ts-expect-error the role is fixed by the class
  const wrongRole: Instruction = { ...base, metadata: { lion_class: "Instruction" }, role: "assistant" };
  // @ts-expect-error content keys are closed (`additionalProperties: false`): a misspelt key is caught
  const misspelt: Instruction = { ...base, metadata: { lion_class: "Instruction" }, content: { instructions: "x" } };
  // @ts-expect-error the record's keys are closed too (the envelope's `additionalProperties: false`)
  const extraKey: System = { ...base, metadata: { lion_class: "System" }, extra: 1 };
  // @ts-expect-error `image_detail` is an enum
  const detail: Instruction = { ...base, metadata: { lion_class: "Instruction" }, content: { image_detail: "max" } };
  // @ts-expect-error `id` and `created_at` are required
  const anonymous: Message = { content: null };
  // @ts-expect-error an embedding holds numbers
  const embedding: Message = { ...base, embedding: ["0.5"] };
  // @ts-expect-error arguments are an object, not a list
  const args: ActionRequest = { ...base, metadata: { lion_class: "ActionRequest" }, content: { arguments: [] } };
  void [noDiscriminator, wrongRole, misspelt, extraKey, detail, anonymous, embedding, args];
}
