"""What an installed lionmsg gives the tools around it (review am): type checkers, package walkers and
licence scanners."""

from __future__ import annotations

import pkgutil
from pathlib import Path

import lionmsg

PACKAGE = Path(lionmsg.__file__).parent


def test_the_package_tells_type_checkers_it_is_typed() -> None:
    # PEP 561: without the marker, a user's mypy skips every lionmsg import (the wheel ships the
    # package directory whole).
    assert (PACKAGE / "py.typed").is_file()


def test_every_module_is_found_by_walking_the_package() -> None:
    """lionmsg.runtime is a regular package: an implicit namespace package is skipped by walk_packages,
    and by the doc tools that walk a package that way."""
    walked = {name for _, name, _ in pkgutil.walk_packages(lionmsg.__path__, "lionmsg.")}
    on_disk = {
        ".".join(("lionmsg", *path.relative_to(PACKAGE).with_suffix("").parts)).removesuffix(".__init__")
        for path in PACKAGE.rglob("*.py")
        if path.name != "__main__.py" and "__pycache__" not in path.parts
    }
    assert on_disk - {"lionmsg"} <= walked
    assert {"lionmsg.runtime", "lionmsg.runtime.manager", "lionmsg.runtime.content.images"} <= walked


def test_the_declared_licence_ships_with_the_source() -> None:
    licence = (PACKAGE.parent / "LICENSE").read_text(encoding="utf-8").split()
    assert licence[:5] == ["Apache", "License", "Version", "2.0,", "January"]
