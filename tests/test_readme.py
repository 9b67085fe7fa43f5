"""The README tells the truth: its first commands are the two the brief asks for, its Python
examples run, and its links lead somewhere in the repository."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_readme_opens_with_the_two_commands() -> None:
    first_block = README.split("```sh\n", 1)[1].split("```", 1)[0]
    commands = [line.split("#", 1)[0].strip() for line in first_block.splitlines()]
    assert commands == ["make demo", "make test"]


def test_readme_python_examples_run() -> None:
    blocks = re.findall(r"```python\n(.*?)```", README, flags=re.DOTALL)
    assert blocks
    for block in blocks:
        exec(compile(block, "README.md", "exec"), {})


def test_the_public_names_paragraph_names_every_exported_name_and_each_exists() -> None:
    import lionmsg
    from lionmsg import MessageManager

    paragraph = README.split("**Public names**", 1)[1].split("\n\n", 1)[0]
    named = set(re.findall(r"`([A-Za-z_][A-Za-z0-9_.]*)`", paragraph))
    assert set(lionmsg.__all__) <= named
    views = (
        named
        - set(lionmsg.__all__)
        - {"lionmsg", "lionmsg.__all__", "lionmsg.store", "lionmsg.schema", "lion_class", "add_message"}
    )
    assert views == {"instructions", "assistant_responses", "actions", "action_requests", "action_responses"}
    assert all(type(getattr(MessageManager(), view)).__name__ == "Pile" for view in views)


def test_quickstart_runs() -> None:
    done = subprocess.run([sys.executable, str(ROOT / "examples" / "quickstart.py")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "records written and reloaded into the same classes" in done.stdout


def test_the_demo_runs_offline_and_prints_the_same_thing_every_time(tmp_path: Path) -> None:
    outputs = []
    for run in ("first", "second"):
        out = tmp_path / run
        done = subprocess.run(
            [sys.executable, str(ROOT / "examples" / "demo" / "demo.py"), str(out)], capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
        assert (out / "histories.db").is_file()
        assert (out / "exchange.json").is_file()
        outputs.append(done.stdout.replace(str(out), "OUT"))
    assert outputs[0] == outputs[1]
    for line in (
        "reloaded fresh: equal",
        "records valid against the published schemas",
        "== researcher ==",
        "== writer ==",
        "== provider chat messages (writer) ==",
    ):
        assert line in outputs[0]


def test_the_readme_shows_the_demo_output() -> None:
    demo = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "demo" / "demo.py"), "build/demo"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert demo.returncode == 0, demo.stderr
    shown = README.split("```text\n$ make demo\n", 1)[1].split("```", 1)[0]
    kept = [line for line in shown.splitlines() if line.strip() and line.strip() != "..."]
    printed = demo.stdout.splitlines()
    assert kept, "the README shows no demo output"
    missing = [line for line in kept if line not in printed]
    assert not missing, f"README lines the demo does not print: {missing}"


_LINK = re.compile(r"\]\(([^)\s]+)\)")


def _heading_anchors(markdown: str) -> set[str]:
    """The anchors GitHub gives a file's headings: lower case, punctuation but `-` dropped, spaces as `-`."""
    headings = re.findall(r"^#+ (.+)$", markdown, flags=re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-") for heading in headings}


def test_every_relative_link_in_the_documentation_leads_to_a_file_of_the_repository() -> None:
    # A link out of the repository (the workspace's ../shared) works on no clone, no forge and no index.
    documents = [
        path
        for path in ROOT.rglob("*.md")
        if not any(part.startswith(".") or part in ("node_modules", "build") for part in path.relative_to(ROOT).parts)
    ]
    assert ROOT / "README.md" in documents
    broken = []
    for document in documents:
        for target in _LINK.findall(document.read_text(encoding="utf-8")):
            if "://" in target or target.startswith(("mailto:", "#")):
                continue
            file_part, _, anchor = target.partition("#")
            resolved = (document.parent / file_part).resolve()
            where = f"{document.relative_to(ROOT)}: {target}"
            if not resolved.is_relative_to(ROOT) or not resolved.exists():
                broken.append(where)
            elif anchor and anchor not in _heading_anchors(resolved.read_text(encoding="utf-8")):
                broken.append(f"{where} (no such heading)")
    assert broken == []
