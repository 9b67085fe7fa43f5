#!/usr/bin/env node
// Generate TypeScript types for lionmsg records from the JSON Schema files in `schemas/`.
//
//   node scripts/generate-types.mjs [--out src/generated/lionmsg.ts]
//
// The schemas name each other by absolute `$id` (https://lionmsg.dev/schemas/v1/...) with relative
// `$ref`s. json-schema-to-typescript's `$RefParser` ignores `$id`s and would fetch any absolute URL
// over the network, so the root schema is compiled with that base URL as its location and the only
// resolver allowed is `lionmsgResolver` below, which serves every URL under the base from the matching
// local file (`schemas/<path>`) and fails on anything else. The `file` and `http` resolvers are off:
// nothing here reads outside `schemas/` or touches the network.
//
// The individual files are compiled, not `schemas/bundle.json`: the bundle's refs are relative to the
// `$id`s embedded in its `$defs`, which `$RefParser` does not understand, and the files give every
// type a name from its `title` (`Instruction`, `InstructionContent`, `MessageRole`, ...).
//
// The output is not committed: it is generated before every type check (`make ts-check`), so it can
// never drift from the schemas. It is deterministic all the same (no timestamps, prettier-formatted).

import { mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { compile } from "json-schema-to-typescript";

const CLIENT_DIR = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const SCHEMA_DIR = resolve(CLIENT_DIR, "../../schemas");
const BASE = "https://lionmsg.dev/schemas/v1/";
const ROOT = "record.schema.json";
const ENVELOPE = "envelope.schema.json";

// The TypeScript name of the record union: its schema's title, `Record`, would shadow TypeScript's
// built-in `Record<K, V>`.
const RENAMED = { Record: "LionRecord" };

function parseArgs(argv) {
  const args = { out: join(CLIENT_DIR, "src/generated/lionmsg.ts") };
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === "--out") args.out = resolve(argv[++i]);
    else throw new Error(`unknown argument ${argv[i]}; usage: generate-types.mjs [--out FILE]`);
  }
  return args;
}

function readSchema(path) {
  const schema = JSON.parse(readFileSync(join(SCHEMA_DIR, path), "utf8"));
  if (schema.$id !== BASE + path) {
    throw new Error(`${path}: $id is ${schema.$id}, expected ${BASE + path}`);
  }
  return schema;
}

// json-schema-to-typescript departs from JSON Schema in two ways that matter here, so the schemas are
// adjusted in memory before compiling (types only: the files and validation are untouched):
// - it infers a type from `default` (`sender: {allOf: [address], default: "unset"}` would lose `null`),
//   while in JSON Schema `default` is an annotation only: `default` is dropped;
// - it reads a schema without `type` (`content` of a Message, `output`: any JSON value) as an object:
//   a schema with no keyword that constrains the value becomes `unknown`.
// A `$defs` entry without a title is named after its key (`uuid` -> `Uuid`), so it gets a named type.
const CONSTRAINING = [
  "type", "enum", "const", "$ref", "allOf", "anyOf", "oneOf", "not",
  "properties", "patternProperties", "additionalProperties", "items", "required",
];
const pascal = (key) => key.replace(/(?:^|_)([a-z0-9])/g, (_, c) => c.toUpperCase());

function forTypes(schema) {
  if (typeof schema !== "object" || schema === null) return schema;
  const out = {};
  for (const [key, value] of Object.entries(schema)) {
    if (key === "default") continue;
    if (["properties", "$defs"].includes(key)) {
      out[key] = Object.fromEntries(
        Object.entries(value).map(([name, sub]) => {
          const typed = forTypes(sub);
          return [name, key === "$defs" && !typed.title ? { title: pascal(name), ...typed } : typed];
        }),
      );
    } else if (["allOf", "anyOf", "oneOf"].includes(key)) out[key] = value.map(forTypes);
    else if (["items", "additionalProperties", "not"].includes(key)) out[key] = forTypes(value);
    else out[key] = value;
  }
  if (!CONSTRAINING.some((key) => key in out)) out.tsType = "unknown";
  return out;
}

// A message kind is `allOf: [envelope]` plus narrowed `properties`. The envelope's
// `additionalProperties: false` already closes the record, so the kind's own object needs no index
// signature; without this json-schema-to-typescript gives it `[k: string]: unknown`, and the
// intersection `Envelope & {...}` would then accept any misspelt key. It is checked, not assumed,
// that the kind adds no key of its own.
function closeKind(path, schema) {
  const extendsEnvelope = (schema.allOf ?? []).some((part) => part.$ref === `../${ENVELOPE}`);
  if (!path.startsWith("messages/") || !extendsEnvelope) return schema;
  const envelopeKeys = new Set(Object.keys(readSchema(ENVELOPE).properties));
  const extra = Object.keys(schema.properties ?? {}).filter((key) => !envelopeKeys.has(key));
  if (extra.length) throw new Error(`${path}: properties ${extra} are not envelope properties`);
  if ("additionalProperties" in schema) return schema;
  return { ...schema, additionalProperties: false };
}

const lionmsgResolver = {
  order: 1,
  canRead: (file) => file.url.startsWith(BASE),
  read(file) {
    const path = file.url.slice(BASE.length).split("#")[0];
    return JSON.stringify(forTypes(closeKind(path, readSchema(path))));
  },
};

// The `default`s the types leave out are what a reader takes for an absent field (a System record
// without `system_message` says the default prompt, as Python reads it): emitted as one constant, by
// schema title and property, from every schema file in a fixed order.
function schemaDefaults() {
  const files = ["envelope.schema.json"];
  for (const dir of ["messages", "content"]) {
    for (const name of readdirSync(join(SCHEMA_DIR, dir)).sort()) files.push(`${dir}/${name}`);
  }
  const defaults = {};
  for (const path of files) {
    const schema = readSchema(path);
    const found = Object.entries(schema.properties ?? {}).filter(([, sub]) => "default" in sub);
    if (found.length) defaults[schema.title] = Object.fromEntries(found.map(([name, sub]) => [name, sub.default]));
  }
  return [
    "",
    "/** The schemas' `default`s by schema title and property: a reader's value for a field a record leaves",
    " * out (a kind's own, then the `Envelope`'s). The types above leave `default` out (an annotation). */",
    `export const DEFAULTS = ${JSON.stringify(defaults, null, 2)} as const;`,
    "",
  ].join("\n");
}

async function main() {
  const { out } = parseArgs(process.argv.slice(2));
  const body = await compile(forTypes(readSchema(ROOT)), "LionRecord", {
    cwd: BASE, // relative refs in the root resolve against its $id's directory
    $refOptions: { resolve: { file: false, http: false, lionmsg: lionmsgResolver } },
    customName: (schema) => RENAMED[schema.title],
    bannerComment: [
      "/* Generated by clients/typescript/scripts/generate-types.mjs from schemas/*.schema.json",
      " * (json-schema-to-typescript). Do not edit: change the schemas and regenerate. */",
    ].join("\n"),
    additionalProperties: true, // JSON Schema's default: an object without the keyword is open
    strictIndexSignatures: true, // `metadata["x"]` is `unknown | undefined`, as at run time
    unknownAny: true, // an unconstrained value (`content` of a Message, `output`) is `unknown`, not `any`
    style: { printWidth: 110 },
  });
  mkdirSync(dirname(out), { recursive: true });
  writeFileSync(out, body + schemaDefaults());
  console.log(`wrote ${relative(process.cwd(), out)}`);
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
