#!/usr/bin/env node
// Print the records that the compiled TypeScript client builds, one JSON line each, with the kind the
// client narrowed each one to and its description. Needs `npx tsc -p tsconfig.json` first (build/).
//
//   node scripts/client-records.mjs             the client's own records
//   node scripts/client-records.mjs --describe  the records on stdin (JSON Lines), as the client reads them
import { readFileSync } from "node:fs";
import { buildRecords, describe, kindOf } from "../build/client.js";

const given = process.argv.includes("--describe");
const records = given
  ? readFileSync(0, "utf8").split("\n").filter((line) => line.trim()).map((line) => JSON.parse(line))
  : buildRecords();
for (const record of records) {
  console.log(JSON.stringify({ kind: kindOf(record), describe: describe(record), record }));
}
