#!/usr/bin/env node
// Print the records that the compiled TypeScript client builds, one JSON line each, with the kind the
// client narrowed each one to and its description. Needs `npx tsc -p tsconfig.json` first (build/).
import { buildRecords, describe, kindOf } from "../build/client.js";

for (const record of buildRecords()) {
  console.log(JSON.stringify({ kind: kindOf(record), describe: describe(record), record }));
}
