"""What an installed lionmsg gives the tools around it (review am): type checkers, package walkers and
licence scanners, and the lower dependency bounds `make test-floors` tests."""

from __future__ import annotations

import pkgutil
from pathlib import Path

import pytest
from floors import floor

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


@pytest.mark.parametrize(
    ("declared", "tested"),
    [
        ("pydantic>=2.10.1,<3", "pydantic==2.10.1"),
        ("hypothesis >= 6.133, <6.170.10", "hypothesis==6.133"),
        ("exceptiongroup>=1.2; python_version < '3.11'", "exceptiongroup==1.2; python_version < '3.11'"),
    ],
)
def test_make_test_floors_installs_each_declared_lower_bound(declared: str, tested: str) -> None:
    assert floor(declared) == tested


@pytest.mark.parametrize("declared", ["pydantic", "pydantic<3", "pydantic==2.10.1", "a>=1,>=2"])
def test_a_dependency_without_one_lower_bound_is_refused_by_the_floors_tool(declared: str) -> None:
    # The floors run would otherwise test whatever pip picks and call it the lower bound.
    with pytest.raises(SystemExit, match="has no single lower bound"):
        floor(declared)
