#!/usr/bin/env node
// Validate lionmsg records with ajv, independently of the Python validator.
//
//   node scripts/validate.mjs [--] PATH...  (files, or directories searched recursively for *.json;
//                                            after `--`, a PATH may start with "-")
//   node scripts/validate.mjs --stdin       (one record per input line, JSON Lines)
//
// PATHs are resolved against the current directory, as any command's are. Prints one JSON line per
// record: {"file": <path relative to the repository, or "<stdin>:N">, "valid": true|false,
// "errors": [...], "inexact": [...]}, and "nesting": N for a record nested deeper than Python reads
// for sure (below). Each verdict is written as soon as it is made. Exit status 0 when every input was
// checked (verdicts are data, not failures; also when the reader of the output leaves early, as
// `| head` does), 2 on bad usage, 1 on a crash (schema that does not compile, unreadable input).
//
// Text is UTF-8, strictly (RFC 8259 §8.1; `lionmsg validate` refuses anything else as "not UTF-8
// text"): bytes that are not UTF-8 (`caf\xe9`, an encoded lone surrogate `\xed\xa0\x80`) and a leading
// BOM make the input not JSON, where a lenient decoder would read U+FFFD or drop the BOM and say valid.
// Each file holds one record; a file that is not JSON is reported as invalid with a `parse` error.
// On --stdin each line is one record and is decoded on its own (a "\n" byte never occurs inside a
// UTF-8 sequence): a line that is not UTF-8 is that line's `parse` error and the other lines are still
// checked, as a bad file among good ones is. (`lionmsg validate -` refuses the whole of such an input
// as unreadable instead: neither calls the bad record valid.) A line made only of JSON white space
// (space, tab, CR: RFC 8259 `ws`) is blank and skipped; any other line is a record, so a line holding
// only a BOM or a U+001C is a `parse` error (JavaScript's trim() drops the BOM, Python's strip() \x1c).
//
// `inexact` lists the instancePath of every number JavaScript may not hold as the record wrote it: an
// integer literal beyond ±(2^53 - 1), where a double no longer tells neighbouring integers apart
// (2^60 + 1 reads as 2^60 and is written back as 1152921504606847000; some, such as 2^53, survive), and any
// literal beyond the largest double, which it reads as Infinity (JSON.stringify then writes null).
// Python reads integers exactly, so a JS service that reads such a record and writes it back changes
// it although ajv calls both valid. It is information: `valid` stays the schema's verdict, which must
// agree with the Python validator's. Whether a number is an integer is read from its literal, because
// `1e+16` (a float in Python too) reads the same in both languages; Node.js 20's JSON.parse does not
// give a reviver the source text (only behind --harmony-json-parse-with-source), so the literals are
// found by a scan of their own.
//
// `nesting` is the depth of arrays and objects (the record itself is 1), given when it exceeds
// PYTHON_NESTING, the deepest text lionmsg writes: Python's JSON decoder recurses once per level and
// refuses a document deeper than the interpreter lets it go (`lionmsg validate`: "not valid JSON: arrays
// and objects nested too deeply to read"; about 993 levels on Python 3.10 and 3.11, more on 3.12 and
// 3.13), which ajv validates at any depth. Like `inexact` it is information and leaves `valid` alone; a
// writer whose record gets it should flatten the record.
//
// The schema is `schemas/bundle.json`: every schema file embedded under `$defs` with its `$id` kept,
// so ajv resolves every `$ref` inside one document and nothing is fetched.

import { readdirSync, readFileSync, statSync, writeSync } from "node:fs";
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
    validateFormats: false, // `format` is an annotation for every client (Python's validators ignore it)
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

// fatal: bytes that are not UTF-8 throw instead of turning into U+FFFD. ignoreBOM: a BOM is kept in
// the text (by default it is dropped unseen) so that it is refused, as lionmsg's reader refuses it.
const UTF8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });
// RFC 8259 `ws`. trim() would also take U+FEFF, U+00A0, U+2028... which make a line not JSON.
const JSON_WHITE_SPACE = new Set([0x20, 0x09, 0x0d, 0x0a]);
const INTEGER_LITERAL = /^-?\d+$/;
const NUMBER_LITERAL = /-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?/y;

/** The JSON text `bytes` hold; throws when they are not UTF-8 or begin with a BOM. */
export function utf8Text(bytes) {
  let text;
  try {
    text = UTF8.decode(bytes);
  } catch {
    throw new Error("not UTF-8 text: JSON between systems is UTF-8 (RFC 8259 §8.1)");
  }
  if (text.startsWith("\ufeff")) {
    throw new Error("Unexpected UTF-8 BOM: JSON writers must not add one (RFC 8259 §8.1)");
  }
  return text;
}

/** A JSON Pointer reference token (RFC 6901), as ajv writes them in `instancePath`. */
function pointerToken(key) {
  return String(key).replaceAll("~", "~0").replaceAll("/", "~1");
}

/** Where the string starting at `text[start]` (a `"`) ends: the index after its closing quote. */
function stringEnd(text, start) {
  let at = start + 1;
  while (text[at] !== '"') at += text[at] === "\\" ? 2 : 1;
  return at + 1;
}

/** Every number literal in `text`, JSON that JSON.parse accepted, by the instancePath of its value; of
 * duplicate keys the last one's wins, as in JSON.parse. A loop, not recursion: JSON.parse reads
 * documents nested deeper than a recursive scan could go. The map's `nesting` is the deepest level of
 * arrays and objects met (0 for a bare value). */
export function numberLiterals(text) {
  const literals = new Map();
  literals.nesting = 0;
  const open = []; // enclosing containers, innermost last: {path, object, key, keyNext}
  const here = () => {
    const top = open.at(-1);
    return top === undefined ? "" : `${top.path}/${pointerToken(top.key)}`;
  };
  let at = 0;
  while (at < text.length) {
    const char = text[at];
    const top = open.at(-1);
    if (char === "{" || char === "[") {
      const object = char === "{";
      open.push({ path: here(), object, key: object ? "" : 0, keyNext: object });
      literals.nesting = Math.max(literals.nesting, open.length);
      at += 1;
    } else if (char === "}" || char === "]") {
      open.pop();
      at += 1;
    } else if (char === ",") {
      if (top.object) top.keyNext = true;
      else top.key += 1;
      at += 1;
    } else if (char === '"') {
      const end = stringEnd(text, at);
      if (top?.keyNext) {
        top.key = JSON.parse(text.slice(at, end));
        top.keyNext = false;
      }
      at = end;
    } else if (char === "-" || (char >= "0" && char <= "9")) {
      NUMBER_LITERAL.lastIndex = at;
      const literal = NUMBER_LITERAL.exec(text)[0];
      literals.set(here(), literal);
      at += literal.length;
    } else {
      at += 1; // white space, ":" and the letters of true, false and null
    }
  }
  return literals;
}

/** JavaScript holds another number than `literal` wrote: an infinity, or an integer past 2^53 - 1 that
 * was rounded. A literal with a fraction or an exponent is a double in Python as well, rounded alike. */
function isInexact(value, literal = String(value)) {
  if (!Number.isFinite(value)) return true;
  return INTEGER_LITERAL.test(literal) && !Number.isSafeInteger(value);
}

/** The instancePath of every number in `record` that JSON.parse did not read as `text` wrote it. */
export function inexactPaths(record, text, literals = numberLiterals(text)) {
  const found = [];
  const pending = [["", record]]; // a stack, children pushed in reverse: found in document order
  while (pending.length > 0) {
    const [path, value] = pending.pop();
    if (typeof value === "number") {
      if (isInexact(value, literals.get(path))) found.push(path);
    } else if (value !== null && typeof value === "object") {
      const children = Object.entries(value);
      // One push per child: spreading a container of some 120,000 entries into one call's arguments
      // overflowed the stack.
      for (let index = children.length - 1; index >= 0; index -= 1) {
        const [key, child] = children[index];
        pending.push([`${path}/${pointerToken(key)}`, child]);
      }
    }
  }
  return found;
}

function verdict(validate, name, bytes) {
  let text;
  let record;
  try {
    text = utf8Text(bytes);
    record = JSON.parse(text);
  } catch (error) {
    const errors = [{ keyword: "parse", message: String(error.message) }];
    return { file: name, valid: false, errors, inexact: [] };
  }
  const valid = validate(record);
  const errors = (validate.errors ?? []).map(({ instancePath, schemaPath, keyword, message }) => ({
    instancePath,
    schemaPath,
    keyword,
    message,
  }));
  const literals = numberLiterals(text);
  const line = { file: name, valid, errors: valid ? [] : errors, inexact: inexactPaths(record, text, literals) };
  return literals.nesting > PYTHON_NESTING ? { ...line, nesting: literals.nesting } : line;
}

/** The deepest text lionmsg writes (`WRITTEN_NESTING` in lionmsg/runtime/wire.py): what every supported
 * Python reads (3.10 and 3.11 stop at about 993 levels). */
export const PYTHON_NESTING = 990;

/** The lines of `bytes`, split at "\n" as String.split would be: a 0x0A byte is never inside a UTF-8
 * sequence, so each line can be decoded (and refused) on its own. */
export function* byteLines(bytes) {
  for (let start = 0; start <= bytes.length; ) {
    const newline = bytes.indexOf(0x0a, start);
    const end = newline === -1 ? bytes.length : newline;
    yield bytes.subarray(start, end);
    start = end + 1;
  }
}

export function isBlank(bytes) {
  return bytes.every((byte) => JSON_WHITE_SPACE.has(byte));
}

const USAGE = "usage: validate.mjs [--] PATH... | --stdin";

/** A verdict line on standard output, written at once: a reader that left (`| head`) ends the run
 * here, quietly, with the status so far (every later record would be validated for nobody). */
function write(line) {
  try {
    writeSync(1, JSON.stringify(line) + "\n");
  } catch (error) {
    if (error.code !== "EPIPE") throw error;
    process.exit(0);
  }
}

function main(argv) {
  if (argv.length === 1 && (argv[0] === "-h" || argv[0] === "--help")) {
    console.log(USAGE);
    return 0;
  }
  const stdin = argv.length === 1 && argv[0] === "--stdin";
  // Paths after `--` may start with "-"; before it, such an argument is an option, and only those above exist.
  const end = argv.indexOf("--");
  const paths = end === -1 ? argv : [...argv.slice(0, end), ...argv.slice(end + 1)];
  const option = (end === -1 ? argv : argv.slice(0, end)).find((arg) => arg.startsWith("-"));
  if (paths.length === 0 || (!stdin && option !== undefined)) {
    console.error(option === undefined ? USAGE : `${USAGE}\nvalidate.mjs: unknown option or misplaced --stdin: ${option}`);
    return 2;
  }
  const { validate } = recordValidator();
  if (stdin) {
    let number = 0;
    for (const line of byteLines(readFileSync(0))) {
      number += 1;
      if (!isBlank(line)) write(verdict(validate, `<stdin>:${number}`, line));
    }
  } else {
    for (const arg of paths) {
      for (const file of jsonFiles(resolve(arg))) {
        write(verdict(validate, relative(REPO, file).split("\\").join("/"), readFileSync(file)));
      }
    }
  }
  return 0;
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  try {
    process.exitCode = main(process.argv.slice(2));
  } catch (error) {
    // A file that cannot be read says so in one line; anything else with its stack.
    console.error(typeof error?.code === "string" ? `validate.mjs: ${error.message}` : error);
    process.exitCode = 1;
  }
}
