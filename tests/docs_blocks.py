"""The code blocks of README.md and docs/*.md, with the check marker each carries (tests/README.md, "Docs
examples"): which blocks need a marker, what the marker says, and each block's command lines as a shell reads
them. Pure text handling; the checks themselves are in tests/test_docs_examples.py."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from markdown_it import MarkdownIt

ROOT = Path(__file__).resolve().parents[1]

# Info strings of the blocks that are commands or YAML, hence need a marker; an unlabeled fence counts as a command.
SHELL_LANGS = ("sh", "bash", "shell", "console", "zsh", "")
YAML_LANGS = ("yaml", "yml")
# A block labeled otherwise (text, python, json, mermaid) that starts with one of these words is a command too.
COMMAND_WORDS = ("gesscale", ".venv/bin/", "make", "sudo", "ansible-playbook", "ansible-vault", "kubectl", "docker",
                 "cp", "export", "git", "flock", "ssh", "curl", "python", "pip", "uv")
MARKER = re.compile(r"<!--\s*check:\s*(run|dry-run|skip)(?::\s*(.*?))?\s*-->\s*$", re.S)


def docs_pages() -> list[Path]:
    """README.md and every page of docs/, in a stable order."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


@dataclass(frozen=True)
class Block:
    """One code block of a page: where it is, its language, its text and its marker (None: unmarked)."""

    page: Path
    line: int  # 1-based line of the opening fence (or first indented line)
    lang: str
    body: str
    fenced: bool
    marker: str | None  # "run", "dry-run" or "skip"
    detail: str  # after the marker's colon: skip's reason, a YAML block's kind, run's environment

    @property
    def where(self) -> str:
        name = self.page.relative_to(ROOT) if self.page.is_relative_to(ROOT) else self.page.name
        return f"{name}:{self.line}"

    @property
    def is_yaml(self) -> bool:
        return self.lang in YAML_LANGS

    @property
    def needs_marker(self) -> bool:
        """A command or YAML block: fenced as sh/bash/console/shell/yaml or unlabeled, or starting with a command."""
        if self.lang in SHELL_LANGS or self.is_yaml:
            return True
        first = next((ln.strip() for ln in self.body.splitlines() if ln.strip()), "")
        return any(first == w or first.startswith(w if w.endswith("/") else f"{w} ") for w in COMMAND_WORDS)


def blocks_of(page: Path, text: str | None = None) -> list[Block]:
    """Every code block of a page (fenced or indented), each with the marker on the line just above it."""
    text = page.read_text() if text is None else text
    tokens = MarkdownIt("commonmark").parse(text)
    out = []
    for i, tok in enumerate(tokens):
        if tok.type not in ("fence", "code_block"):
            continue
        prev = tokens[i - 1] if i else None
        found = MARKER.match(prev.content.strip()) if prev is not None and prev.type == "html_block" else None
        lang = tok.info.split()[0] if tok.type == "fence" and tok.info.strip() else ""
        out.append(Block(page, tok.map[0] + 1, lang, tok.content, tok.type == "fence",
                         found.group(1) if found else None, (found.group(2) or "").strip() if found else ""))
    return out


def all_blocks() -> list[Block]:
    return [b for page in docs_pages() for b in blocks_of(page)]


def inline_commands(page: Path) -> list[tuple[str, str]]:
    """(where, text) of every inline code span of a page that starts with a gesscale command (tables included)."""
    out = []
    for tok in MarkdownIt("commonmark").enable("table").parse(page.read_text()):
        for child in tok.children or []:
            if child.type == "code_inline" and re.match(r"(\.venv/bin/)?gesscale [a-z]", child.content):
                out.append((f"{page.relative_to(ROOT)}:{tok.map[0] + 1 if tok.map else '?'}", child.content))
    return out


def problems(blocks: list[Block]) -> list[str]:
    """What is wrong with the blocks' markup: an indented code block, a command or YAML block without a marker, a
    skip without its reason, a marker on an HTML comment that does not parse."""
    out = []
    for b in blocks:
        if not b.fenced:
            out.append(f"{b.where}: an indented code block; fence it (```sh with a check marker, ```text for output)")
        elif b.needs_marker and b.marker is None:
            out.append(f"{b.where}: a {b.lang or 'command'} block without a check marker (run, dry-run or skip: why)")
        elif b.marker == "skip" and not b.detail:
            out.append(f"{b.where}: skip without a reason (<!-- check: skip: why -->)")
    return out


def _uncommented(line: str) -> str:
    """The line without its trailing comment: a `#` at the start of a word outside quotes."""
    quote = ""
    for i, c in enumerate(line):
        if quote:
            quote = "" if c == quote else quote
        elif c in "'\"":
            quote = c
        elif c == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].strip()
    return line.strip()


def command_lines(body: str) -> list[str]:
    """The command lines of a shell block: continuations joined, comments and blank lines dropped."""
    joined = re.sub(r"\\\n\s*", " ", body)
    return [cut for cut in map(_uncommented, joined.splitlines()) if cut]


def argv_of(line: str) -> list[str]:
    """The words of a command line without leading VAR=value assignments, `.venv/bin/` spelt as the bare name."""
    words = shlex.split(line, comments=True)
    while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=\S*", words[0]):
        words = words[1:]
    if words and words[0].startswith(".venv/bin/"):
        words[0] = words[0].removeprefix(".venv/bin/")
    return words


# A value written as a placeholder: DIR, FILE, SPEC.yaml, HOST:PORT, 'CMD' (an environment assignment is not one).
PLACEHOLDER = re.compile(r"[A-Z][A-Z0-9_]+(?::[A-Z]+)?(?:\.\w+)?")


def is_synopsis(line: str) -> bool:
    """A line that shows a command's shape rather than one invocation: `[optional]`, `a|b` choices, `...`, or a
    placeholder in capitals."""
    words = [w.strip("'\"[]") for w in line.split() if "=" not in w]
    return bool(re.search(r"\s\[|\.\.\.|…|\s\|\s", line)) or any(PLACEHOLDER.fullmatch(w) for w in words)
