"""Write the bundled schema document: every file of `schemas/` embedded in one JSON document.

    python tools/bundle.py            write schemas/bundle.json
    python tools/bundle.py --check    exit 1 when it is stale

The bundle is a 2020-12 compound document (design.md §3): each schema file sits under `$defs` with its
own `$id` kept, so its relative `$ref`s resolve inside the document and nothing is fetched, and its
`$schema` left out: it inherits the root's 2020-12 dialect, and a dialect named inside makes
jsonschema-based validators (check-jsonschema among them) build a fresh validator class at every `$ref`
into it, dropping the ECMA-262 `pattern` a caller put in place of Python's. It is for
tools that do not resolve references across files (hypothesis-jsonschema, check-jsonschema, clients in
other languages). Its root validates any record: it refers to `record.schema.json` by its `$defs` entry,
which resolves whatever URI a client stores the bundle under.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from generate import SCHEMA_DIR, SchemaFileError, SchemaSet

BUNDLE_NAME = "bundle.json"
# Bumped whenever a schema file changes (README, "Schemas for other languages"): patch for descriptions
# and annotations, minor for loosening only (every record valid before stays valid and means the same;
# the schemas are closed, so a record using an addition is refused by older readers), major with a new
# `$id` base for anything else. `--check` fails until the version is bumped and the set's digest recorded.
SCHEMA_VERSION = "1.0.2"
# 1.0.1: the embedding's description says its items are read as doubles.
# 1.0.2: `x-lionmsg-expected` names a UUID and an image reference in words for error messages.
RECORDED_DIGESTS = {
    "1.0.0": "86ac6ea319c4616111281cfbd240fcc44797a4c4aa00d60d7a1033cbe556ab5c",
    "1.0.1": "7e687a7cf030dbcf173900ed501f7d762e1af8522836dc82a00e52cb858fde11",
    # The same files as released, recorded again when the digest took in the order of `properties`.
    "1.0.2": "76fdca12c7c80fcb70b98834dc07907d42cf31f1dd70a78640c2bb04e443ff79",
}
BASE_URI = "https://lionmsg.dev/schemas/v1/"


def digest(schemas: SchemaSet) -> str:
    """SHA-256 of the schema files' content (parsed, keys sorted: formatting changes nothing) and of the
    order of every `properties` object's names, which is not formatting: the generated classes take
    their fields in that order (positional arguments, the key order of every record written). Digests
    recorded before 1.0.2's were of the content alone."""
    canonical = json.dumps(
        [schemas.by_path, _property_orders(schemas.by_path)], sort_keys=True, ensure_ascii=False, separators=(",", ":")
    )
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def _property_orders(value: Any) -> list[list[str]]:
    """The names of every `properties` object in `value`, in their order, in document order."""
    found: list[list[str]] = []
    pending = [value]
    while pending:
        node = pending.pop()
        if isinstance(node, dict):
            properties = node.get("properties")
            if isinstance(properties, dict):
                found.append(list(properties))
            pending.extend(reversed([node[key] for key in sorted(node)]))
        elif isinstance(node, list):
            pending.extend(reversed(node))
    return found


def version_problem(schemas: SchemaSet) -> str | None:
    """Why the schema set's version is out of date, or None."""
    found = digest(schemas)
    if RECORDED_DIGESTS.get(SCHEMA_VERSION) == found:
        return None
    return (
        f"the schemas changed since version {SCHEMA_VERSION} was recorded: bump SCHEMA_VERSION in "
        f"tools/bundle.py (patch, minor or major: see its comment) and record its digest {found}"
    )


def def_name(path: str) -> str:
    """The `$defs` key of a schema file: `messages/instruction.schema.json` -> `messages.instruction`."""
    return path.removesuffix(".schema.json").replace("/", ".")


def build(schemas: SchemaSet) -> dict[str, Any]:
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": BASE_URI + BUNDLE_NAME,
        "title": "lionmsg records",
        "description": (
            "Every lionmsg schema in one document. The root validates any message record; each kind is "
            "under $defs by its file name (messages.instruction, ...), with its $id kept."
        ),
        "x-lionmsg-schema-version": SCHEMA_VERSION,
        "$ref": "#/$defs/" + def_name("record.schema.json"),  # resolves wherever the bundle is stored
        "$defs": {def_name(path): _embedded(schema) for path, schema in sorted(schemas.by_path.items())},
    }


def _embedded(schema: dict[str, Any]) -> dict[str, Any]:
    """A schema file as the bundle embeds it: without its `$schema` (see the module's doc)."""
    return {key: value for key, value in schema.items() if key != "$schema"}


def render(schemas: SchemaSet) -> str:
    return json.dumps(build(schemas), indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="fail when the bundle is stale")
    parser.add_argument("--schemas", type=Path, default=SCHEMA_DIR)
    args = parser.parse_args(argv)
    try:
        schemas = SchemaSet.load(args.schemas)
    except SchemaFileError as exc:
        print(exc, file=sys.stderr)
        return 1
    text = render(schemas)
    target = args.schemas / BUNDLE_NAME
    if args.check:
        problem = version_problem(schemas)
        if problem is not None:
            print(problem, file=sys.stderr)
            return 1
        if not target.is_file() or target.read_bytes() != text.encode("utf-8"):  # CRLF line ends too
            print(f"{target} is stale: run `make bundle`", file=sys.stderr)
            return 1
        return 0
    target.write_text(text, encoding="utf-8", newline="\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
