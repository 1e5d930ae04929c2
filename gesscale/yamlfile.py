"""Read a user's YAML file; a missing, unreadable, malformed or unreasonable file is one `UserError` naming it.

A key given twice in one mapping is an error, not "the last one wins" (PyYAML's default): in a latency map or a
scenario, a pair or an option listed twice is a mistake whose silent resolution would change the experiment.
Keys brought in by a YAML merge (`<<: *anchor`) may still be overridden, as YAML intends.

Limits, checked on the composed node graph before any value is built (so that nothing downstream ever walks or
prints an exploded value): the file's size (`gesscale.inputfile.MAX_INPUT_BYTES`), what aliases add when
expanded (`MAX_ALIAS_EXPANSION` nodes: a 1 KB "billion laughs" file otherwise becomes millions of nodes), a
recursive alias, the nesting depth (`MAX_DEPTH`) and the digits of an integer (`MAX_INT_DIGITS`).

libyaml's C parser is used when PyYAML has it (`yaml.CSafeLoader`, several times faster on large latency maps),
with the same constructor, so the results are those of the pure-Python loader. Error messages are always the
pure-Python loader's: a file the C loader refuses is parsed again by it for the message, so that both give the
same line; a text holding a tab is read by the Python loader (libyaml takes some tabs PyYAML refuses, such as
one after a value). A file whose characters could nest deeper than `_NESTING_BOUND` (flow brackets open at once,
indentation and block indicators starting a line) is refused before either parser sees it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import yaml

from gesscale.errors import UserError, brief
from gesscale.inputfile import read_text

MAX_ALIAS_EXPANSION = 100_000  # nodes that aliases may add to a document when expanded
MAX_DEPTH = 200  # levels of nesting (a scenario has 4)
MAX_INT_DIGITS = 30  # digits of an integer (a count, a seed: 19 digits hold any 64-bit one)
# A document whose characters allow more nesting than this is refused before parsing: libyaml's composer recurses
# in C (60,000 levels crash the process) and PyYAML takes seconds on a thousand levels (5 s for 3,000). 400 allows
# MAX_DEPTH levels with room, or indentation of up to 199 characters.
_NESTING_BOUND = 400
_INT_TAG = "tag:yaml.org,2002:int"


class DuplicateKeyError(yaml.constructor.ConstructorError):
    """A mapping names the same key twice (reported with the line of the second one)."""


class LimitError(yaml.YAMLError):
    """A document beyond one of the limits (alias expansion, depth, integer digits); `mark` is where, if known."""

    def __init__(self, problem: str, mark: Any = None) -> None:
        super().__init__(problem)
        self.problem = problem
        self.problem_mark = mark


class _Strict:
    """The strictness shared by both loaders: a mapping may not repeat a key; an integer has bounded digits."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=deep)  # type: ignore[attr-defined]
            try:
                duplicate = key in seen
            except TypeError:  # an unhashable key: the base class reports it
                break
            if duplicate:
                raise DuplicateKeyError(None, None, f"duplicate key {brief(key)}", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)  # type: ignore[misc]


class _StrictLoader(_Strict, yaml.SafeLoader):
    """PyYAML's pure-Python safe loader, strict."""


_LOADERS: list[type] = [_StrictLoader]
if getattr(yaml, "__with_libyaml__", False):

    class _StrictCLoader(_Strict, yaml.CSafeLoader):  # type: ignore[name-defined, misc]
        """libyaml's parser with the same constructor and the same strictness."""

    _LOADERS.insert(0, _StrictCLoader)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    return []


def check_node(root: yaml.Node) -> None:
    """Refuse a composed document beyond the limits (module docstring); one pass over its distinct nodes."""
    size: dict[int, int] = {}
    height: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            on_path.discard(key)
            kids = _children(node)
            size[key] = 1 + sum(size[id(k)] for k in kids)
            height[key] = 1 + max((height[id(k)] for k in kids), default=0)
            if height[key] > MAX_DEPTH:
                raise LimitError(f"nested more than {MAX_DEPTH} levels deep", node.start_mark)
            continue
        if key in size:
            continue
        if key in on_path:
            raise LimitError("a recursive alias (a node that contains itself)", node.start_mark)
        if isinstance(node, yaml.ScalarNode):
            if node.tag == _INT_TAG and sum(c.isdigit() for c in str(node.value)) > MAX_INT_DIGITS:
                raise LimitError(f"an integer of more than {MAX_INT_DIGITS} digits ({brief(node.value)})",
                                 node.start_mark)
            size[key], height[key] = 1, 1
            continue
        on_path.add(key)
        stack.append((node, True))
        stack.extend((k, False) for k in _children(node) if id(k) not in size)
    extra = size[id(root)] - len(size)
    if extra > MAX_ALIAS_EXPANSION:
        raise LimitError(f"its aliases expand to more than {MAX_ALIAS_EXPANSION:,} extra nodes (an alias bomb?);"
                         " write the values out")


def _nesting_bound(text: str) -> int:
    """An upper bound on the nesting depth of a document, from its characters: the flow brackets open at once,
    plus twice the longest run of indentation and block indicators (spaces, tabs, `-`, `?`) that starts a line.
    Brackets inside quoted text only raise the bound (the slower loader is then used, never a wrong result)."""
    data = np.frombuffer(text.encode("utf-8", "surrogatepass"), dtype=np.uint8)
    if data.size == 0:
        return 0
    step = np.zeros(data.size, dtype=np.int8)
    step[(data == ord("[")) | (data == ord("{"))] = 1
    step[(data == ord("]")) | (data == ord("}"))] = -1
    flow = int(np.cumsum(step, dtype=np.int64).max(initial=0))
    prefix = (data == ord(" ")) | (data == ord("-")) | (data == ord("?")) | (data == ord("\t"))
    starts = np.concatenate([[0], np.flatnonzero(data == ord("\n")) + 1])
    stops = np.append(np.flatnonzero(~prefix), data.size)  # a newline is no prefix character
    run = stops[np.searchsorted(stops, starts)] - starts
    return flow + 2 * int(run.max(initial=0)) + 2


def _load(loader_cls: type, text: str) -> Any:
    if "\t" in text:  # libyaml takes tabs PyYAML refuses (after a value: `0<tab>`): the Python loader decides
        loader_cls = _StrictLoader
    loader = loader_cls(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        check_node(node)
        return loader.construct_document(node)
    finally:
        loader.dispose()


def parse_yaml(text: str, *, loader: type | None = None) -> Any:
    """Parse one YAML document, strictly (module docstring): `DuplicateKeyError` for a repeated key, `LimitError`
    beyond a limit, another `yaml.YAMLError` for malformed YAML. `loader` forces one of `LOADERS`."""
    if _nesting_bound(text) > _NESTING_BOUND:
        raise LimitError(f"nested more than {MAX_DEPTH} levels deep (or {_NESTING_BOUND:,} brackets or indentation"
                         " characters at once)")
    loader = loader or _LOADERS[0]
    try:
        return _load(loader, text)
    except RecursionError:
        raise LimitError(f"nested more than {MAX_DEPTH} levels deep") from None
    except (LimitError, DuplicateKeyError):
        raise  # our own checks: the same for both loaders
    except yaml.YAMLError:
        if loader is _StrictLoader:
            raise
    return _load(_StrictLoader, text)  # the C loader refused it: the Python loader's error, same for both


LOADERS: tuple[type, ...] = tuple(_LOADERS)  # the C loader first when available, then the pure-Python one


def _reason(err: yaml.YAMLError) -> str:
    """The parser's own reason, with a hint for the usual mistake (a tab in the indentation)."""
    problem = getattr(err, "problem", None) or getattr(err, "context", None) or ""
    reason = " ".join(str(problem).split())
    if "\\t" in reason or "\t" in reason or "tab" in reason:
        reason += " (YAML indents with spaces; a tab cannot indent or start a value)"
    return reason if len(reason) <= 200 else reason[:200] + "…"


def read_yaml(path: str | Path, what: str) -> Any:
    """The parsed document of `path`; `what` names the kind of file in error messages ("scenario", ...)."""
    p = Path(path)
    text = read_text(p, what, hint=f" ({what} files are YAML)")
    try:
        return parse_yaml(text)
    except DuplicateKeyError as err:
        mark = err.problem_mark
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise UserError(f"{p}: {err.problem}{where} (each key may appear once in a mapping)") from None
    except LimitError as err:
        mark = err.problem_mark
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise UserError(f"{p}: YAML refused{where}: {err.problem}") from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        reason = _reason(err)
        raise UserError(f"{p}: malformed YAML{where}" + (f": {reason}" if reason else "")) from None
