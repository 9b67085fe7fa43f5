"""Where the schema files are and how to read them.

An installed wheel carries them as `lionmsg/_schemas/`; a source checkout (an editable install, the
tests) reads the repository's `schemas/` directly, so there is one copy to edit: a checkout is the
package beside lionmsg's own `pyproject.toml` (its [project] table names lionmsg), and there a stray
`lionmsg/_schemas/` (an unpacked wheel, an older layout) is never read. Anywhere else (an installed or
vendored copy beside another project's pyproject.toml and schemas/) the package reads its own copy.
"""

from __future__ import annotations

import json
import re
import sys
from functools import cache
from pathlib import Path
from typing import Any

__all__ = ["BUNDLE_NAME", "KINDS", "kind_of_class", "load_bundle", "load_schema", "schema_dir", "schema_names"]

BUNDLE_NAME = "bundle.json"

KINDS: dict[str, str] = {
    "message": "Message",
    "system": "System",
    "instruction": "Instruction",
    "assistant_response": "AssistantResponse",
    "action_request": "ActionRequest",
    "action_response": "ActionResponse",
}
"""Record kinds by schema name (`messages/<kind>.schema.json`), with the class each one is."""

_KIND_BY_CLASS = {cls: kind for kind, cls in KINDS.items()}
_PACKAGE = Path(__file__).resolve().parent.parent


def schema_dir() -> Path:
    """The directory holding the schema files and the bundle: a checkout's schemas/, else the copy the
    installed package carries."""
    candidate = _PACKAGE.parent / "schemas" if _is_checkout(_PACKAGE.parent) else _PACKAGE / "_schemas"
    if (candidate / BUNDLE_NAME).is_file():
        return candidate
    raise FileNotFoundError(f"no lionmsg schemas at {candidate} (lionmsg at {_PACKAGE})")


@cache
def _is_checkout(root: Path) -> bool:
    """Whether `root` is lionmsg's repository: its pyproject.toml's [project] table names lionmsg.
    Decided by the name alone, so a checkout missing its schemas/ says so instead of reading a stray
    package copy."""
    try:
        text = (root / "pyproject.toml").read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError):
        return False
    return _project_name(text) == "lionmsg"


def _project_name(text: str) -> object:
    """`[project] name` of a pyproject.toml's text (None when it has none or is no TOML)."""
    if sys.version_info >= (3, 11):
        return _project_name_read(text)
    return _project_name_scanned(text)


if sys.version_info >= (3, 11):
    import tomllib

    def _project_name_read(text: str) -> object:
        try:
            project = tomllib.loads(text).get("project")
        except tomllib.TOMLDecodeError:
            return None
        return project.get("name") if isinstance(project, dict) else None


def _project_name_scanned(text: str) -> object:
    """3.10 has no TOML reader: the `name = "..."` line of the [project] table, as pyproject files spell
    it (a header and key in their plain forms, any spacing; not a dotted key or an inline table)."""
    table = _PROJECT_TABLE.search(text)
    if table is None:
        return None
    name = _NAME_LINE.search(table.group(1))
    return None if name is None else name.group(2)


_PROJECT_TABLE = re.compile(
    r"""^[ \t]*\[[ \t]*(?:project|"project"|'project')[ \t]*\][ \t]*(?:#[^\n]*)?$(.*?)(?=^[ \t]*\[[ \t]*[^\s\[]|\Z)""",
    re.MULTILINE | re.DOTALL,
)
_NAME_LINE = re.compile(
    r"""^[ \t]*(?:name|"name"|'name')[ \t]*=[ \t]*(["'])([^"'\n]*)\1[ \t]*(?:#.*)?$""", re.MULTILINE
)


def schema_names() -> list[str]:
    """Every schema file, by its path relative to the schema directory (`messages/system.schema.json`)."""
    root = schema_dir()
    return sorted(path.relative_to(root).as_posix() for path in root.rglob("*.schema.json"))


def load_schema(name: str) -> dict[str, Any]:
    """One schema file by relative path; `messages/system` and `system` (a kind, or its class in any case
    as `kind_named` reads it: `fuzz --kind` takes the same names) are accepted too."""
    kind = kind_named(name)
    if kind is not None:
        name = f"messages/{kind}"
    if not name.endswith(".schema.json"):
        name += ".schema.json"
    if name not in schema_names():
        raise KeyError(f"no schema named {name!r}; known: {', '.join(schema_names())}")
    loaded: dict[str, Any] = json.loads((schema_dir() / name).read_text(encoding="utf-8"))
    return loaded


@cache
def _bundle_text() -> str:
    return (schema_dir() / BUNDLE_NAME).read_text(encoding="utf-8")


def load_bundle() -> dict[str, Any]:
    """A fresh copy of the bundled document (every schema under `$defs`, `$id`s kept)."""
    bundle: dict[str, Any] = json.loads(_bundle_text())
    return bundle


def kind_named(name: str) -> str | None:
    """The kind `name` is: a kind (`action_response`) or its class in any case (`ActionResponse`); None
    for anything else."""
    if name in KINDS:
        return name
    return next((kind for kind, cls in KINDS.items() if cls.lower() == name.lower()), None)


def kind_of_class(lion_class: Any) -> str:
    """The kind a `metadata.lion_class` value names (its last dotted segment), `message` otherwise."""
    if isinstance(lion_class, str):
        return _KIND_BY_CLASS.get(lion_class.rsplit(".", 1)[-1], "message")
    return "message"
