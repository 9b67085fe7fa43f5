"""Render `lionmsg/generated/` from `schemas/` and `templates/`.

    python tools/generate.py            write the generated modules
    python tools/generate.py --check    exit 1 and print a diff when they are stale

Who renders what:

* `content.py` (the five content dataclasses) -- datamodel-code-generator, driven by our template
  `templates/datamodel-codegen/dataclass.jinja2`. Before handing it the content schemas, this script
  inlines their `$ref`s and annotates every property with its compiled wire check (`x-lionmsg-check`),
  so the template can render the record loader and serializer next to the fields.
* `roles.py`, `messages.py`, `__init__.py` -- Jinja directly (`templates/*.py.jinja`) from the role,
  envelope and message-kind schemas: datamodel-code-generator would duplicate the role enum per
  subclass and invent stand-in classes for the envelope hierarchy.

Every file is then formatted by the pinned ruff, so the output is byte-identical on every run.
"""

from __future__ import annotations

import argparse
import difflib
import json
import subprocess
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2
import referencing
import referencing.jsonschema
from referencing._core import Resolver

ROOT = Path(__file__).resolve().parent.parent
SCHEMA_DIR = ROOT / "schemas"
TEMPLATE_DIR = ROOT / "templates"
OUTPUT_DIR = ROOT / "lionmsg" / "generated"

CONTENT_SCHEMAS = ("system", "instruction", "assistant_response", "action_request", "action_response")
KIND_SCHEMAS = ("message", *CONTENT_SCHEMAS)


# -- loading -------------------------------------------------------------------------------------


class SchemaFileError(ValueError):
    """A schema file that is not JSON: the tools report it by name instead of a traceback."""


@dataclass(frozen=True)
class SchemaSet:
    """The schema files of one directory, addressable by file name and by `$id`."""

    root: Path
    by_path: dict[str, dict[str, Any]]
    registry: referencing.Registry[Any]

    @classmethod
    def load(cls, root: Path) -> SchemaSet:
        by_path: dict[str, dict[str, Any]] = {}
        for path in sorted(root.rglob("*.schema.json")):
            name = path.relative_to(root).as_posix()
            try:
                by_path[name] = json.loads(path.read_text(encoding="utf-8"))
            except json.JSONDecodeError as exc:
                raise SchemaFileError(f"{name}: not valid JSON: {exc}") from None
        # No `retrieve`: a $ref to anything outside these files fails instead of touching the network.
        registry: referencing.Registry[Any] = referencing.Registry().with_resources(
            (schema["$id"], referencing.jsonschema.DRAFT202012.create_resource(schema)) for schema in by_path.values()
        )
        return cls(root, by_path, registry)

    def get(self, name: str) -> dict[str, Any]:
        return self.by_path[name]

    def resolver(self, schema: dict[str, Any]) -> Resolver[Any]:
        return self.registry.resolver(base_uri=schema["$id"])

    def resolve(self, ref: str, resolver: Resolver[Any]) -> tuple[dict[str, Any], Resolver[Any]]:
        """The schema a `$ref` points at, and the resolver for its own `$ref`s."""
        resolved = resolver.lookup(ref)
        assert isinstance(resolved.contents, dict), ref
        return resolved.contents, resolved.resolver

    def inline(self, schema: Any, resolver: Resolver[Any], max_depth: int = 64) -> Any:
        """`schema` with every `$ref` replaced by its target; RecursionError past `max_depth` refs deep
        (the portable subset has no recursive refs)."""
        if isinstance(schema, list):
            return [self.inline(item, resolver, max_depth) for item in schema]
        if not isinstance(schema, dict):
            return schema
        if "$ref" in schema:
            if max_depth == 0:
                raise RecursionError(f"$ref {schema['$ref']!r} nests too deeply")
            target, target_resolver = self.resolve(schema["$ref"], resolver)
            siblings = {k: v for k, v in schema.items() if k != "$ref"}
            return {**self.inline(target, target_resolver, max_depth - 1), **self.inline(siblings, resolver, max_depth)}
        return {
            key: self.inline(value, resolver, max_depth)
            for key, value in schema.items()
            if key not in ("$defs", "$id", "$schema")
        }


# -- wire checks compiled from JSON Schema -------------------------------------------------------


@dataclass(frozen=True)
class Check:
    """A Python expression over `{v}` that holds exactly when the value matches a schema."""

    expr: str
    expected: str


_TYPE_CHECKS = {
    "string": ("isinstance({v}, str)", "a string"),
    # JSON Schema counts 1.0 as an integer (numbers compare by value); a bool is never a number.
    "integer": (
        "((isinstance({v}, int) and not isinstance({v}, bool)) or (isinstance({v}, float) and {v}.is_integer()))",
        "an integer",
    ),
    "number": ("(isinstance({v}, (int, float)) and not isinstance({v}, bool))", "a number"),
    "boolean": ("isinstance({v}, bool)", "a boolean"),
    "object": ("isinstance({v}, dict)", "an object"),
    "array": ("isinstance({v}, list)", "an array"),
    "null": ("{v} is None", "null"),
}

_SUPPORTED_CHECK_KEYWORDS = {
    "type", "enum", "const", "pattern", "items", "anyOf", "oneOf", "allOf",
    "minLength", "maxLength", "minimum", "maximum",
    # annotations: no effect on validity
    "title", "description", "default", "readOnly", "format",
}  # fmt: skip


# The annotation that names, in words, what a schema accepts: the generated checks' error messages use it.
EXPECTED_ANNOTATION = "x-lionmsg-expected"


def _one_of(values: list[Any]) -> str:
    """`{v}` equal to one of `values` as JSON compares: Python's `==` takes True for 1 and 0 for False,
    so a bool matches only bools and a number only numbers."""
    bools = [value for value in values if isinstance(value, bool)]
    numbers = [value for value in values if isinstance(value, (int, float)) and not isinstance(value, bool)]
    if bools and numbers:
        raise ValueError(f"cannot compile an enum that mixes booleans and numbers: {values!r}")
    if bools:
        return f"(isinstance({{v}}, bool) and {{v}} in {tuple(values)!r})"
    if numbers:
        return f"(not isinstance({{v}}, bool) and {{v}} in {tuple(values)!r})"
    return f"{{v}} in {tuple(values)!r}"


def compile_check(schema: Any, depth: int = 0) -> Check | None:
    """Compile an inlined schema into a `Check`; None when every JSON value is valid."""
    if schema is True or schema == {}:
        return None
    assert isinstance(schema, dict), schema
    unknown = {k for k in schema if not k.startswith("x-")} - _SUPPORTED_CHECK_KEYWORDS
    if unknown:
        raise ValueError(f"cannot compile a wire check for keyword(s) {sorted(unknown)}")
    parts: list[Check] = []
    types = schema.get("type", [])
    types = types if isinstance(types, list) else [types]
    # Constraints that apply to strings only; joined to the type check when it is exactly "string".
    string_conds: list[Check] = []
    if "pattern" in schema:
        pattern = schema["pattern"]
        # `matches` applies a pattern to the whole string (fullmatch, ECMA-262's `$`): the same as JSON
        # Schema's search only for a pattern anchored at both ends, which check_schemas requires.
        if not (pattern.startswith("^") and pattern.endswith("$")):
            raise ValueError(f"cannot compile an unanchored pattern {pattern!r}: anchor it with ^...$")
        string_conds.append(Check(f"matches({pattern!r}, {{v}})", f"matching {pattern}"))
    for keyword, op in (("minLength", ">="), ("maxLength", "<=")):
        if keyword in schema:
            string_conds.append(Check(f"len({{v}}) {op} {schema[keyword]}", f"with {keyword} {schema[keyword]}"))
    if types == ["string"] and string_conds:
        conds = " and ".join(c.expr for c in string_conds)
        expected = "a string " + " and ".join(c.expected for c in string_conds)
        parts.append(Check(f"(isinstance({{v}}, str) and {conds})", expected))
    else:
        if types:
            exprs = [_TYPE_CHECKS[t][0] for t in types]
            parts.append(Check(_any_of(exprs), " or ".join(_TYPE_CHECKS[t][1] for t in types)))
        for string_cond in string_conds:
            expr = f"(not isinstance({{v}}, str) or {string_cond.expr})"
            parts.append(Check(expr, f"a string {string_cond.expected} when a string"))
    if "enum" in schema:
        choices = ", ".join(map(json.dumps, schema["enum"]))
        parts.append(Check(_one_of(schema["enum"]), f"one of {choices}"))
    if "const" in schema:
        parts.append(Check(_one_of([schema["const"]]), f"exactly {json.dumps(schema['const'])}"))
    for keyword, op in (("minimum", ">="), ("maximum", "<=")):
        if keyword in schema:
            cond = f"{{v}} {op} {schema[keyword]!r}"
            numbers = "(not isinstance({v}, (int, float)) or isinstance({v}, bool) or {cond})"
            parts.append(Check(numbers.replace("{cond}", cond), f"{keyword} {schema[keyword]}"))
    if "items" in schema:
        item = compile_check(schema["items"], depth + 1)
        if item is not None:
            name = f"item{depth}"
            # `not {v} or`: an empty array (the usual case) skips building a generator for all().
            cond = f"(not {{v}} or all({item.expr.replace('{v}', name)} for {name} in {{v}}))"
            if types == ["array"]:  # the type check above becomes "an array of <items>"
                parts[0] = Check(
                    f"(isinstance({{v}}, list) and {cond})", f"an array of items that are each {item.expected}"
                )
            else:
                parts.append(Check(f"(not isinstance({{v}}, list) or {cond})", f"an array of {item.expected}"))
    if "oneOf" in schema:  # "exactly one" is not "any": reading it as anyOf would accept what it refuses
        raise ValueError("cannot compile oneOf into a wire check: use anyOf with branches that exclude each other")
    if "anyOf" in schema:
        branches = [compile_check(branch, depth) for branch in schema["anyOf"]]
        if all(branch is not None for branch in branches):
            checks = [branch for branch in branches if branch is not None]
            parts.append(Check(_any_of([c.expr for c in checks]), " or ".join(c.expected for c in checks)))
    for branch in schema.get("allOf", []):
        check = compile_check(branch, depth)
        if check is not None:
            parts.append(check)
    if not parts:
        return None
    expr = parts[0].expr if len(parts) == 1 else "(" + " and ".join(p.expr for p in parts) + ")"
    # A schema that names what it accepts (`x-lionmsg-expected`) is named so in the error message: its
    # constraints read as a recital of patterns ("a string and a string matching ^[0-9a-fA-F]{8}-...").
    if EXPECTED_ANNOTATION in schema:
        return Check(expr, str(schema[EXPECTED_ANNOTATION]))
    expected = parts[0].expected if len(parts) == 1 else " and ".join(p.expected for p in parts)
    return Check(expr, expected)


def _any_of(exprs: list[str]) -> str:
    return exprs[0] if len(exprs) == 1 else "(" + " or ".join(exprs) + ")"


# -- rendering -----------------------------------------------------------------------------------


def _header(sources: list[str], template: str) -> str:
    """What a generated file says first: do not edit it, and what it is made from (every schema file it
    reads and its template), so a reader knows where a change belongs."""
    listed = ", ".join(f"schemas/{s}" for s in sources) if sources else "none (no schema is read)"
    return (
        "# DO NOT EDIT: generated by tools/generate.py (`make generate`).\n"
        f"# sources: {listed}\n"
        f"# template: templates/{template}\n"
    )


def _jinja() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATE_DIR),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["py"] = repr
    return env


def _role_members(schemas: SchemaSet) -> dict[str, str]:
    """Each role (role.schema.json's enum) with the name of its MessageRole member (its x-enum-varnames)."""
    role = schemas.get("role.schema.json")
    return dict(zip(role["enum"], role["x-enum-varnames"], strict=True))


def _python_default(value: Any, schemas: SchemaSet) -> str:
    """A record default as Python source for the envelope fields: a role as its MessageRole member."""
    members = _role_members(schemas)
    if isinstance(value, str) and value in members:
        return f"MessageRole.{members[value]}"
    return repr(value)


def _role_member(file: str, role: Any, schemas: SchemaSet) -> str:
    """A kind's fixed role (its schema's `role.const`) as Python source: its MessageRole member."""
    members = _role_members(schemas)
    if not isinstance(role, str) or role not in members:
        raise SchemaFileError(f"{file}: role {role!r} is not one of role.schema.json's roles ({', '.join(members)})")
    return f"MessageRole.{members[role]}"


def render_roles(schemas: SchemaSet) -> str:
    schema = schemas.get("role.schema.json")
    members = list(zip(schema["x-enum-varnames"], schema["enum"], strict=True))
    return (
        _jinja()
        .get_template("roles.py.jinja")
        .render(header=_header(["role.schema.json"], "roles.py.jinja"), schema=schema, members=members)
    )


def render_content(schemas: SchemaSet) -> str:
    """The content dataclasses, through datamodel-code-generator and our dataclass template."""
    defs: dict[str, Any] = {}
    imports: list[str] = []
    for name in CONTENT_SCHEMAS:
        schema = schemas.get(f"content/{name}.schema.json")
        inlined = schemas.inline(schema, schemas.resolver(schema))
        for prop in inlined["properties"].values():
            check = compile_check({k: v for k, v in prop.items() if k == EXPECTED_ANNOTATION or not k.startswith("x-")})
            if check is not None:
                prop["x-lionmsg-check"] = {"expr": check.expr, "expected": check.expected}
            if "enum" in prop:  # the values, for the behaviour's own checks (e.g. at render time): Python source
                prop["x-lionmsg-choices"] = "frozenset({" + ", ".join(map(repr, prop["enum"])) + "})"
            # The default as a Python expression (a fresh list or dict on every evaluation).
            prop["x-lionmsg-default"] = repr(prop.get("default"))
        module, base = _module_and_name(schema["x-lionmsg-behaviour"]) or ("", "")
        imports.append(f"{module}.{base}")
        inlined["x-lionmsg-behaviour"] = base
        defs[inlined["title"]] = inlined
    # The root becomes a union alias of the five classes (datamodel-code-generator always renders a root).
    document = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "AnyContent",
        "description": "Any typed message content.",
        "anyOf": [{"$ref": f"#/$defs/{title}"} for title in defs],
        "$defs": defs,
    }
    # Imported here: the schema tools and the tests that only load schemas (`SchemaSet`) need no generator.
    from datamodel_code_generator import InputFileType, LiteralType, PythonVersion, generate
    from datamodel_code_generator.enums import DataclassArguments, DataModelType

    code = generate(
        document,
        input_file_type=InputFileType.JsonSchema,
        output_model_type=DataModelType.DataclassesDataclass,
        dataclass_arguments=DataclassArguments(slots=True),
        custom_template_dir=TEMPLATE_DIR / "datamodel-codegen",
        custom_file_header=_header(
            # envelope.schema.json: its $defs (the UUID pattern) are inlined into the content checks
            [*(f"content/{n}.schema.json" for n in CONTENT_SCHEMAS), "envelope.schema.json"],
            "datamodel-codegen/dataclass.jinja2",
        ).rstrip("\n"),
        disable_timestamp=True,
        target_python_version=PythonVersion.PY_310,
        use_union_operator=True,
        use_standard_collections=True,
        strict_nullable=True,
        field_include_all_keys=True,
        enum_field_as_literal=LiteralType.All,
        keep_model_order=True,
        use_schema_description=True,
        additional_imports=[
            *imports,
            "lionmsg.runtime.content.base.copy_field",
            "lionmsg.runtime.content.base.own_container",
            "lionmsg.runtime.content.base.owned_copy",
            "lionmsg.runtime.content.base.shallow_copy",
            "lionmsg.runtime.content.base.shaped_record",
            "lionmsg.runtime.content.lazylists.NOT_MADE",
            "lionmsg.runtime.content.lazylists.lazy_lists",
            "lionmsg.runtime.fastpath.JSON_SCALARS",
            "lionmsg.runtime.fastpath.MISSING",
            "lionmsg.runtime.fastpath.json_copy",
            "lionmsg.runtime.wire.matches",
            "lionmsg.runtime.wire.RecordFieldError",
            "typing.ClassVar",
            "typing.Any",
            "collections.abc.Collection",
            "collections.abc.Mapping",
            "typing.Literal",
        ],
        formatters=[],
    )
    assert isinstance(code, str)
    return code


@dataclass(frozen=True)
class Kind:
    """One message class, read from its schema."""

    name: str
    schema_file: str
    description: str
    role_member: str  # its role as Python source, `MessageRole.USER`
    content_class: str | None
    content_description: str
    sender_default: str
    recipient_default: str
    behaviour: tuple[str, str] | None  # (module, class) of the kind's mixin, from x-lionmsg-behaviour


def _kinds(schemas: SchemaSet) -> Iterator[Kind]:
    envelope = schemas.get("envelope.schema.json")["properties"]
    for name in KIND_SCHEMAS:
        file = f"messages/{name}.schema.json"
        schema = schemas.get(file)
        props = schema["properties"]
        content_ref = props["content"].get("allOf", [{}])[0].get("$ref")
        content_class = None
        if content_ref is not None:
            content_schema, _ = schemas.resolve(content_ref, schemas.resolver(schema))
            content_class = content_schema["title"]
        yield Kind(
            name=schema["title"],
            schema_file=file,
            description=schema["description"],
            role_member=_role_member(file, props["role"]["const"], schemas),
            content_class=content_class,
            content_description=props["content"].get("description", envelope["content"]["description"]),
            sender_default=_python_default(props.get("sender", envelope["sender"])["default"], schemas),
            recipient_default=_python_default(props.get("recipient", envelope["recipient"])["default"], schemas),
            behaviour=_module_and_name(schema.get("x-lionmsg-behaviour")),
        )


def _module_and_name(reference: str | None) -> tuple[str, str] | None:
    if reference is None:
        return None
    module, _, name = reference.partition(":")
    return module, name


def render_messages(schemas: SchemaSet) -> str:
    envelope = schemas.get("envelope.schema.json")
    kinds = list(_kinds(schemas))
    generic = next(kind for kind in kinds if kind.content_class is None)  # the typed kinds' base class
    contents = [f"content/{n}.schema.json" for n in CONTENT_SCHEMAS]  # their titles name the content classes
    # role.schema.json too: the envelope's defaults name its roles (_envelope_default).
    sources = [
        "envelope.schema.json",
        "role.schema.json",
        *(k.schema_file for k in kinds),
        "record.schema.json",
        *contents,
    ]
    return (
        _jinja()
        .get_template("messages.py.jinja")
        .render(
            header=_header(sources, "messages.py.jinja"),
            kinds=kinds,
            envelope=envelope["properties"],
            # The routing defaults the typed kinds inherit, the generic Message's: a kind declares the
            # fields again only to change them.
            inherited={"sender": generic.sender_default, "recipient": generic.recipient_default},
            base_id=schemas.get("record.schema.json")["$id"].rsplit("/", 1)[0] + "/",
        )
    )


def render_init(schemas: SchemaSet) -> str:
    return _jinja().get_template("__init__.py.jinja").render(header=_header([], "__init__.py.jinja"))


def render_all(schema_dir: Path = SCHEMA_DIR) -> dict[str, str]:
    """Every generated file, by name, formatted."""
    schemas = SchemaSet.load(schema_dir)
    files = {
        "__init__.py": render_init(schemas),
        "roles.py": render_roles(schemas),
        "content.py": render_content(schemas),
        "messages.py": render_messages(schemas),
    }
    return {name: _format(name, text) for name, text in files.items()}


def _format(name: str, text: str) -> str:
    """Sort imports and format with the project's pinned ruff, from stdin to stdout."""
    ruff = [sys.executable, "-m", "ruff"]
    stdin_name = ["--stdin-filename", str(OUTPUT_DIR / name)]
    fixed = subprocess.run(
        [*ruff, "check", "--fix-only", "--exit-zero", "--quiet", *stdin_name, "-"],
        input=text, capture_output=True, text=True, check=True, cwd=ROOT,
    ).stdout  # fmt: skip
    formatted = subprocess.run(
        [*ruff, "format", "--quiet", *stdin_name, "-"],
        input=fixed, capture_output=True, text=True, check=True, cwd=ROOT,
    )  # fmt: skip
    return formatted.stdout


# -- command line --------------------------------------------------------------------------------


def _modules(output_dir: Path) -> list[Path]:
    """The package's modules and stubs: a hand-added `.pyi` would stand in for a generated module, for
    mypy, unseen by a check of the `.py` files alone."""
    return sorted([*output_dir.glob("*.py"), *output_dir.glob("*.pyi")])


def stale_report(rendered: Mapping[str, str], output_dir: Path) -> str:
    """A unified diff between what is on disk and what the schemas render; empty when up to date.
    Byte for byte: a file whose lines end in CRLF is stale too (it says so, as the diff cannot show it)."""
    on_disk = {p.name: p.read_bytes().decode("utf-8") for p in _modules(output_dir)}
    where = output_dir.resolve()
    shown = where.relative_to(ROOT) if where.is_relative_to(ROOT) else where  # the path to open and fix
    lines: list[str] = []
    for name in sorted(set(rendered) | set(on_disk)):
        old, new = on_disk.get(name, ""), rendered.get(name, "")
        if old == new:
            continue
        if "\r\n" in old:
            lines.append(f"{shown}/{name}: it has CRLF line ends; generated files end their lines in LF\n")
            old = old.replace("\r\n", "\n")
        if old != new:
            lines += difflib.unified_diff(
                old.splitlines(keepends=True), new.splitlines(keepends=True),
                f"{shown}/{name} (on disk)", f"{shown}/{name} (from schemas)",
            )  # fmt: skip
    return "".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="fail with a diff when generated/ is stale")
    parser.add_argument("--schemas", type=Path, default=SCHEMA_DIR)
    parser.add_argument("--out", type=Path, default=OUTPUT_DIR)
    args = parser.parse_args(argv)
    try:
        rendered = render_all(args.schemas)
    except SchemaFileError as exc:
        print(exc, file=sys.stderr)
        return 1
    if args.check:
        report = stale_report(rendered, args.out)
        if report:
            sys.stdout.write(report)
            print("\ngenerated code is stale or was edited by hand: run `make generate`", file=sys.stderr)
            return 1
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    for stale in {p.name for p in _modules(args.out)} - set(rendered):
        (args.out / stale).unlink()
    for name, text in rendered.items():
        (args.out / name).write_text(text, encoding="utf-8", newline="\n")  # LF on every platform
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
