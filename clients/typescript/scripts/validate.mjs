#!/usr/bin/env node
// Validate lionmsg records with ajv, independently of the Python validator.
//
//   node scripts/validate.mjs PATH...       (files, or directories searched recursively for *.json)
//   node scripts/validate.mjs --stdin       (one record per input line, JSON Lines)
//
// Prints one JSON line per record: {"file": <path relative to the repository, or "<stdin>:N">,
// "valid": true|false, "errors": [...]}. Each file holds one record; a file that is not JSON is
// reported as invalid with a `parse` error. Exit status 0 when every input was checked (verdicts are
// data, not failures), 2 on bad usage, 1 on a crash (schema that does not compile, unreadable input).
//
// The schema is `schemas/bundle.json`: every schema file embedded under `$defs` with its `$id` kept,
// so ajv resolves every `$ref` inside one document and nothing is fetched.

import { readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import Ajv2020 from "ajv/dist/2020.js";

const REPO = resolve(dirname(fileURLToPath(import.meta.url)), "../../..");
const BUNDLE = join(REPO, "schemas/bundle.json");

/** Every `x-` keyword used anywhere in the schema, found by walking it (they are annotations). */
export function customKeywords(schema) {
  const found = new Set();
  const walk = (node) => {
    if (Array.isArray(node)) node.forEach(walk);
    else if (node !== null && typeof node === "object") {
      for (const [key, value] of Object.entries(node)) {
        if (key.startsWith("x-")) found.add(key);
        walk(value);
      }
    }
  };
  walk(schema);
  return [...found].sort();
}

/** A compiled validator for any record: the bundle's root (`record.schema.json`, one of six kinds). */
export function recordValidator(bundle = JSON.parse(readFileSync(BUNDLE, "utf8"))) {
  const ajv = new Ajv2020({
    strict: true, // unknown keywords, ignored keywords, type mismatches and the like throw at compile
    allowUnionTypes: true, // `"type": ["string", "null"]` is how the schemas spell nullable
    allErrors: true, // report every broken rule, not the first
    // unicodeRegExp (default true): patterns are compiled with the `u` flag, ECMA-262 semantics.
  });
  // The `x-` keywords carry Python-only facts; declared as a vocabulary they are allowed and ignored.
  ajv.addVocabulary(customKeywords(bundle));
  return { ajv, validate: ajv.compile(bundle) };
}

function* jsonFiles(path) {
  if (statSync(path).isDirectory()) {
    for (const entry of readdirSync(path, { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : 1))) {
      const child = join(path, entry.name);
      if (entry.isDirectory()) yield* jsonFiles(child);
      else if (entry.name.endsWith(".json")) yield child;
    }
  } else {
    yield path;
  }
}

function verdict(validate, name, text) {
  let record;
  try {
    record = JSON.parse(text);
  } catch (error) {
    return { file: name, valid: false, errors: [{ keyword: "parse", message: String(error.message) }] };
  }
  const valid = validate(record);
  const errors = (validate.errors ?? []).map(({ instancePath, schemaPath, keyword, message }) => ({
    instancePath,
    schemaPath,
    keyword,
    message,
  }));
  return { file: name, valid, errors: valid ? [] : errors };
}

function main(argv) {
  if (argv.length === 0 || argv.includes("-h") || argv.includes("--help")) {
    console.error("usage: validate.mjs PATH... | --stdin");
    return 2;
  }
  const { validate } = recordValidator();
  const out = [];
  if (argv.length === 1 && argv[0] === "--stdin") {
    const lines = readFileSync(0, "utf8").split("\n");
    lines.forEach((line, index) => {
      if (line.trim()) out.push(verdict(validate, `<stdin>:${index + 1}`, line));
    });
  } else {
    for (const arg of argv) {
      for (const file of jsonFiles(resolve(arg))) {
        out.push(verdict(validate, relative(REPO, file).split("\\").join("/"), readFileSync(file, "utf8")));
      }
    }
  }
  process.stdout.write(out.map((line) => JSON.stringify(line) + "\n").join(""));
  return 0;
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  try {
    process.exitCode = main(process.argv.slice(2));
  } catch (error) {
    console.error(error);
    process.exitCode = 1;
  }
}
