#!/usr/bin/env node
// Print the records that the compiled TypeScript client builds, one JSON line each, with the kind the
// client narrowed each one to and its description. Needs `npx tsc -p tsconfig.json` first (build/).
//
//   node scripts/client-records.mjs             the client's own records
//   node scripts/client-records.mjs --describe  the records on stdin (JSON Lines), as the client reads them
//
// Stdin is read as validate.mjs reads it: UTF-8 strictly, lines blank only when they hold JSON's white
// space; a line that is not a record is `{"line": N, "error": ...}` (exit 1), never a stack trace.
import { readFileSync } from "node:fs";
import { buildRecords, describe, kindOf } from "../build/client.js";
import { byteLines, isBlank, utf8Text } from "./validate.mjs";

function* given() {
  let number = 0;
  for (const bytes of byteLines(readFileSync(0))) {
    number += 1;
    if (isBlank(bytes)) continue;
    try {
      yield { record: JSON.parse(utf8Text(bytes)) };
    } catch (error) {
      yield { error: { line: number, error: error.message } };
    }
  }
}

const entries = process.argv.includes("--describe") ? [...given()] : buildRecords().map((record) => ({ record }));
for (const { record, error } of entries) {
  if (error !== undefined) {
    console.log(JSON.stringify(error));
    process.exitCode = 1;
  } else {
    console.log(JSON.stringify({ kind: kindOf(record), describe: describe(record), record }));
  }
}
