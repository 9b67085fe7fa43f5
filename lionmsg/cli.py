"""The `lionmsg` command: print the schemas, validate records, generate records.

    lionmsg schema [NAME] [--bundle | --list]
    lionmsg validate FILE...            JSON (one record or an array) or JSON Lines; `-` reads stdin
    lionmsg fuzz --count N [--kind K] [--seed S]
    lionmsg show FILE [--branch ID] [--chat]   a SQLite store, a JSON snapshot, or JSON/JSON Lines records

Exit status: 0 when everything is valid, 1 when a record (or a JSON line) is invalid, 2 for a usage
error, an unreadable file or a missing optional dependency. Bad input never produces a traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from lionmsg.runtime.wire import loads_json
from lionmsg.schema.files import BUNDLE_NAME, KINDS, load_schema, schema_dir, schema_names

__all__ = ["main"]

EXIT_OK, EXIT_INVALID, EXIT_USAGE = 0, 1, 2
_JSON_LINES_SUFFIXES = (".jsonl", ".ndjson")


class UsageError(Exception):
    """Reported as `lionmsg: <message>` with exit status 2."""


# -- schema ----------------------------------------------------------------------------------------


def _schema(args: argparse.Namespace, out: TextIO) -> int:
    if args.list:
        out.write("\n".join([*schema_names(), BUNDLE_NAME]) + "\n")
        return EXIT_OK
    if args.bundle:
        out.write((schema_dir() / BUNDLE_NAME).read_text(encoding="utf-8"))
        return EXIT_OK
    try:
        schema = load_schema(args.name)
    except KeyError as error:
        raise UsageError(error.args[0]) from None
    out.write(json.dumps(schema, indent=2, ensure_ascii=False) + "\n")
    return EXIT_OK


# -- validate --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Entry:
    """One record of an input file, or the reason a part of the file is not a record."""

    where: str
    record: Any = None
    syntax_error: str | None = None


def _read(path: str, stdin: TextIO) -> str:
    try:
        if path != "-":
            return Path(path).read_text(encoding="utf-8")
        # The bytes, decoded here as a file is: the locale's text layer may be another encoding, or
        # let undecodable bytes through as surrogates (C.UTF-8 does).
        buffer = getattr(stdin, "buffer", None)
        return stdin.read() if buffer is None else buffer.read().decode("utf-8")
    except UnicodeDecodeError as error:
        raise UsageError(f"cannot read {path}: not UTF-8 text ({error.reason} at byte {error.start})") from None
    except OSError as error:
        raise UsageError(f"cannot read {path}: {error.strerror or error}") from None


def _entries(path: str, text: str) -> Iterator[_Entry]:
    """JSON Lines for `.jsonl`/`.ndjson`/stdin; otherwise one JSON document (a record or a list of them)."""
    if path == "-" or path.endswith(_JSON_LINES_SUFFIXES):
        # Lines end at "\n" only: str.splitlines() also breaks at U+2028, U+0085, \x1c..., which JSON
        # strings may hold raw (and `fuzz` writes them so), cutting a record in two.
        for number, line in enumerate(text.split("\n"), start=1):
            if not line.strip():
                continue
            try:
                yield _Entry(f"{path}:{number}", loads_json(line))
            except json.JSONDecodeError as error:
                yield _Entry(f"{path}:{number}", syntax_error=f"not valid JSON: {error.msg} (column {error.colno})")
            except ValueError as error:
                yield _Entry(f"{path}:{number}", syntax_error=f"not valid JSON: {error}")
        return
    try:
        document = loads_json(text)
    except json.JSONDecodeError as error:
        yield _Entry(f"{path}:{error.lineno}", syntax_error=f"not valid JSON: {error.msg} (column {error.colno})")
        return
    except ValueError as error:
        yield _Entry(path, syntax_error=f"not valid JSON: {error}")
        return
    if isinstance(document, list):
        for index, record in enumerate(document):
            yield _Entry(f"{path}[{index}]", record)
    else:
        yield _Entry(path, document)


def _validate(args: argparse.Namespace, out: TextIO) -> int:
    from lionmsg.generated.messages import Message

    validator = _record_validator()
    checked = invalid = unreadable = 0
    for path in args.files:
        try:
            text = _read(path, sys.stdin)
        except UsageError as error:
            print(f"lionmsg: {error}", file=sys.stderr)
            unreadable += 1
            continue
        for entry in _entries(path, text):
            checked += 1
            if entry.syntax_error is not None:
                invalid += 1
                out.write(f"{entry.where}: {entry.syntax_error}\n")
                continue
            errors = validator.errors(entry.record)
            if errors:
                invalid += 1
                kind = KINDS[validator.kind_of(entry.record)]
                out.write(f"{entry.where}: invalid {kind} record{_id_of(entry.record)}\n")
                out.writelines(f"    {error}\n" for error in errors)
                continue
            try:
                Message.from_dict(entry.record)
            except (ValueError, TypeError) as error:  # the schema and the loader must agree: say so loudly
                invalid += 1
                out.write(f"{entry.where}: valid against the schemas but rejected by lionmsg: {error}\n")
    out.write(f"{checked} record(s) checked, {invalid} invalid, {unreadable} file(s) unreadable\n")
    if unreadable:
        return EXIT_USAGE
    return EXIT_INVALID if invalid else EXIT_OK


def _id_of(record: Any) -> str:
    ident = record.get("id") if isinstance(record, dict) else None
    if not isinstance(ident, str):
        return ""
    # As given, unless it would break the one-line report (a newline, a control character): then quoted.
    return f" {ident}" if ident.isprintable() else f" {json.dumps(ident)}"


def _missing_extra(command: str, extra: str, error: ImportError) -> str:
    return f"{command} needs the `{extra}` extra ({error.name} is missing): pip install 'lionmsg[{extra}]'"


def _record_validator() -> Any:
    try:
        from lionmsg.schema.validator import RecordValidator
    except ImportError as error:
        raise UsageError(_missing_extra("validate", "cli", error)) from None
    return RecordValidator()


# -- fuzz ------------------------------------------------------------------------------------------


def _fuzz(args: argparse.Namespace, out: TextIO) -> int:
    try:
        from lionmsg.schema.fuzz import generate_records
    except ImportError as error:
        raise UsageError(_missing_extra("fuzz", "fuzz", error)) from None
    kind = _kind_name(args.kind)
    for record in generate_records(args.count, kind, args.seed):
        out.write(json.dumps(record, ensure_ascii=False) + "\n")
    return EXIT_OK


def _kind_name(value: str | None) -> str | None:
    if value is None:
        return None
    by_class = {cls.lower(): kind for kind, cls in KINDS.items()}
    kind = value if value in KINDS else by_class.get(value.lower())
    if kind is None:
        raise UsageError(f"unknown kind {value!r}; choose from {', '.join(KINDS)}")
    return kind


def _count(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {value!r}") from None
    if number < 0:
        raise argparse.ArgumentTypeError(f"must not be negative: {number}")
    return number


# -- show ------------------------------------------------------------------------------------------

_SQLITE_HEADER = b"SQLite format 3\x00"


def _show(args: argparse.Namespace, out: TextIO) -> int:
    from lionmsg.runtime.render.table import conversation_table
    from lionmsg.store import StoreError

    try:
        for title, messages in _histories(args.file, args.branch):
            out.write(f"{title}\n{conversation_table(messages)}\n")
            if args.chat:
                chat = [{"role": m.role.value, "content": m.rendered} for m in messages if m.role.value != "unset"]
                out.write(json.dumps(chat, indent=2, ensure_ascii=False) + "\n")
            out.write("\n")
    except (StoreError, _BadRecord) as error:
        print(f"lionmsg: {error}", file=sys.stderr)
        return EXIT_INVALID
    return EXIT_OK


class _BadRecord(Exception):
    """A record of a shown file that does not load."""


def _histories(path: str, branch: str | None) -> Iterator[tuple[str, list[Any]]]:
    """(title, messages) for each history the file holds."""
    try:
        with open(path, "rb") as file:
            head = file.read(len(_SQLITE_HEADER))
    except OSError as error:
        raise UsageError(f"cannot read {path}: {error.strerror or error}") from None
    if head == _SQLITE_HEADER:
        yield from _store_histories(path, branch)
        return
    if branch is not None:
        raise UsageError("--branch applies to a SQLite store only")
    text = _read(path, sys.stdin)
    if not path.endswith(_JSON_LINES_SUFFIXES):
        try:
            document = loads_json(text)
        except ValueError:  # not JSON (or too deep to read): the entries below report it
            document = None
        if isinstance(document, dict) and document.get("format") == "lionmsg-snapshot":
            yield from _snapshot_histories(path)
            return
    yield path, [_load_record(entry) for entry in _entries(path, text)]


def _store_histories(path: str, branch: str | None) -> Iterator[tuple[str, list[Any]]]:
    from lionmsg.store import SQLiteStore, UnknownBranchError

    with SQLiteStore(path, read_only=True) as store:  # showing a file never changes it
        branches = store.branches() if branch is None else [branch]
        for key in branches:
            try:
                manager = store.load(key)
            except UnknownBranchError as error:
                raise UsageError(error.args[0]) from None
            yield f"branch {key} ({len(manager)} messages)", list(manager)


def _snapshot_histories(path: str) -> Iterator[tuple[str, list[Any]]]:
    from lionmsg.runtime.branch import Branch
    from lionmsg.runtime.exchange import Exchange
    from lionmsg.store import load_snapshot

    held = load_snapshot(path)
    if isinstance(held, Exchange):
        for owner in held.owner_ids:
            flow = held.get(owner)
            assert flow is not None  # listed owners have a mailbox
            if len(flow.outbox):
                yield f"owner {owner}: outbox", [flow.items[ident] for ident in flow.outbox]
            for name, inbox in flow.inboxes():
                yield f"owner {owner}: {name}", [flow.items[ident] for ident in inbox]
    elif isinstance(held, Branch):
        yield f"branch {held.id} ({len(held.messages)} messages)", list(held.messages)
    else:
        yield f"history ({len(held)} messages)", list(held)


def _load_record(entry: _Entry) -> Any:
    from lionmsg.generated.messages import Message

    if entry.syntax_error is not None:
        raise _BadRecord(f"{entry.where}: {entry.syntax_error}")
    try:
        return Message.from_dict(entry.record)
    except (ValueError, TypeError) as error:
        raise _BadRecord(f"{entry.where}: not a message record: {error}") from None


# -- entry point -----------------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="lionmsg", description="Message records: schemas, validation, fuzzing.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    schema = commands.add_parser("schema", help="print a schema (the record union by default)")
    schema.add_argument("name", nargs="?", default="record", help="a schema file or a kind (instruction, ...)")
    shown = schema.add_mutually_exclusive_group()
    shown.add_argument("--bundle", action="store_true", help="print the bundled document (all schemas in one)")
    shown.add_argument("--list", action="store_true", help="list the schema files")
    schema.set_defaults(run=_schema)

    validate = commands.add_parser("validate", help="validate JSON or JSON Lines records against the schemas")
    validate.add_argument("files", nargs="+", metavar="FILE", help="a .json, .jsonl or .ndjson file, or - for stdin")
    validate.set_defaults(run=_validate)

    fuzz = commands.add_parser("fuzz", help="emit schema-generated records as JSON Lines")
    fuzz.add_argument("--count", type=_count, default=10, help="how many records (default 10)")
    fuzz.add_argument("--kind", help=f"one kind: {', '.join(KINDS)} (default: all)")
    fuzz.add_argument("--seed", type=int, default=None, help="make the output reproducible")
    fuzz.set_defaults(run=_fuzz)

    show = commands.add_parser("show", help="print a stored history as a conversation table")
    show.add_argument("file", metavar="FILE", help="a SQLite store, a JSON snapshot, or JSON/JSON Lines records")
    show.add_argument("--branch", help="one branch of a SQLite store (default: every branch)")
    show.add_argument("--chat", action="store_true", help="also print the provider chat messages")
    show.set_defaults(run=_show)
    return parser


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    args = _parser().parse_args(argv)
    stream = out if out is not None else sys.stdout
    try:
        status: int = args.run(args, stream)
    except UsageError as error:
        print(f"lionmsg: {error}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:  # `lionmsg fuzz | head`: the reader left; that is not an error
        sys.stderr.close()
        return EXIT_OK
    return status


if __name__ == "__main__":
    raise SystemExit(main())
