"""Reading YAML a stranger wrote: bounded in size, depth and alias expansion before PyYAML builds
anything, UTF-8 only, YAML 1.2 booleans, duplicate keys refused, and a line for every node path.

PyYAML's scanner and parser are iterative, but its composer recurses once per nesting level
and the objects it builds share aliased subtrees, which every later walk (pydantic, the line
index, a dump) expands again. So the event stream is measured first, with anchors counted at
their expanded size, and nothing is composed when a limit is passed.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from services.common.errors import YamlProblem

#: The largest spec file read, in bytes (the biggest example is about 2 kB).
MAX_BYTES = 1 << 20
#: The deepest nesting accepted, aliases expanded (a spec needs about 5: targets[0].options.x).
MAX_DEPTH = 32
#: Nodes (scalars, lists, mappings) accepted once every alias is expanded: a 400-byte alias bomb
#: stands for billions, a spec with 1,000 thread counts for about a thousand, the largest
#: example spec for about 150.
MAX_NODES = 20_000

_MERGE_TAG = "tag:yaml.org,2002:merge"

NodePath = tuple[Any, ...]


#: libyaml's parser when PyYAML was built with it (its wheels are): about 50 times faster than
#: the pure-Python one, which needs seconds for 100,000 values.
_Base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Loader(_Base):  # type: ignore[misc,valid-type]
    """YAML 1.2 booleans: only true/false. The seeds name targets `off`, `on`, `8`; YAML 1.1
    would silently turn `off` into False."""


_Loader.yaml_implicit_resolvers = {
    k: [(tag, rx) for tag, rx in v if tag != "tag:yaml.org,2002:bool"]
    for k, v in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)


def read_text(path: str | Path) -> str:
    """The file's text; YamlProblem when it is too big or not UTF-8 (OSError passes through)."""
    with open(path, "rb") as f:
        raw = f.read(MAX_BYTES + 1)
    if len(raw) > MAX_BYTES:
        raise YamlProblem(f"the file is larger than {MAX_BYTES // 1024} KiB; a spec is a few kB")
    return decode(raw)


def decode(raw: bytes) -> str:
    """UTF-8 text (a BOM allowed); YamlProblem naming the line of the first bad byte."""
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        raise YamlProblem(f"not UTF-8 text: byte 0x{raw[e.start]:02x} at offset {e.start}", line=line) from None


def _mark_line(mark: Any) -> int | None:
    return mark.line + 1 if mark is not None else None


class _Frame:
    """One open collection while measuring: its anchor, what it holds so far, and where the
    next child sits (for the field path of an error)."""

    __slots__ = ("anchor", "nodes", "height", "mapping", "at_key", "key", "index")

    def __init__(self, anchor: str | None, mapping: bool):
        self.anchor, self.mapping = anchor, mapping
        self.nodes = self.height = self.index = 0
        self.at_key = True
        self.key: Any = None

    def child_path(self) -> Any:
        return self.key if self.mapping else self.index

    def child_done(self, nodes: int, height: int) -> None:
        self.nodes += nodes
        self.height = max(self.height, height + 1)
        if self.mapping:
            self.at_key = not self.at_key
        else:
            self.index += 1


def _path_text(stack: list[_Frame], limit: int = 6) -> str:
    parts = [f.child_path() for f in stack if not (f.mapping and f.at_key)][:limit]
    out = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in parts).lstrip(".")
    return out + ("..." if len(stack) > limit else "")


def measure(text: str) -> None:
    """Refuse text whose nesting (aliases expanded) passes MAX_DEPTH, whose node count (every
    alias counted at its anchor's size) passes MAX_NODES, or that holds a recursive alias,
    reading events only."""
    if len(text) > MAX_BYTES:
        raise YamlProblem(f"the text is larger than {MAX_BYTES // 1024} KiB; a spec is a few kB")
    anchors: dict[str, tuple[int, int]] = {}  # anchor -> (expanded nodes, height)
    stack: list[_Frame] = []
    total = 0

    def fail(message: str, mark: Any) -> YamlProblem:
        return YamlProblem(message, path=_path_text(stack), line=_mark_line(mark))

    def add(nodes: int, height: int, mark: Any) -> None:
        nonlocal total
        total += nodes
        if total > MAX_NODES:
            raise fail(f"too many values: more than {MAX_NODES:,} once aliases are expanded", mark)
        if len(stack) + height > MAX_DEPTH:
            raise fail(f"nested more than {MAX_DEPTH} levels deep (aliases expanded)", mark)
        if stack:
            stack[-1].child_done(nodes, height)

    for event in yaml.parse(text, Loader=_Loader):
        if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            if len(stack) + 1 > MAX_DEPTH:
                raise fail(f"nested more than {MAX_DEPTH} levels deep", event.start_mark)
            stack.append(_Frame(event.anchor, isinstance(event, yaml.MappingStartEvent)))
        elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            frame = stack.pop()
            # Its children were counted as they came; count the collection itself.
            total -= frame.nodes
            if frame.anchor is not None:
                anchors[frame.anchor] = (frame.nodes + 1, frame.height)
            add(frame.nodes + 1, frame.height, event.start_mark)
        elif isinstance(event, yaml.ScalarEvent):
            if stack and stack[-1].mapping and stack[-1].at_key:
                stack[-1].key = event.value
            if event.anchor is not None:
                anchors[event.anchor] = (1, 0)
            add(1, 0, event.start_mark)
        elif isinstance(event, yaml.AliasEvent):
            if any(frame.anchor == event.anchor for frame in stack):
                raise fail(f"alias *{event.anchor} refers to a collection that contains it (a recursive "
                           "structure)", event.start_mark)
            nodes, height = anchors.get(event.anchor, (1, 0))
            add(nodes, height, event.start_mark)


def _key_text(key: Any) -> str:
    return key if isinstance(key, str) else repr(key)


def _walk(root: yaml.Node) -> dict[NodePath, int]:
    """Every node path's 1-based line; YamlProblem on a key given twice in one mapping. Bounded
    by measure(): aliased subtrees are walked once per use, as a validator would."""
    lines: dict[NodePath, int] = {}
    todo: list[tuple[yaml.Node, NodePath]] = [(root, ())]
    while todo:
        node, path = todo.pop()
        lines.setdefault(path, node.start_mark.line + 1)
        if isinstance(node, yaml.MappingNode):
            first: dict[Any, int] = {}
            for k, v in node.value:
                if k.tag == _MERGE_TAG or not isinstance(k, yaml.ScalarNode):
                    todo.append((v, path + (k.value,)))
                    continue
                key = k.value
                line = k.start_mark.line + 1
                if key in first:
                    where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".")
                    raise YamlProblem(f"key {_key_text(key)!r} given twice (first at line {first[key]}); "
                                      "YAML would silently keep the last one",
                                      path=f"{where}.{key}" if where else str(key), line=line)
                first[key] = line
                lines[path + (key,)] = line
                todo.append((v, path + (key,)))
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                todo.append((item, path + (i,)))
    return lines


def load(text: str) -> tuple[Any, dict[NodePath, int]]:
    """The data of one YAML document and the line of every node path in it; YamlProblem for
    anything unacceptable, never another exception."""
    measure_or_syntax(text)
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None, {}
        lines = _walk(node)
        # construct after the walk: merge keys rewrite the mapping nodes while constructing.
        return loader.construct_document(node), lines
    except yaml.YAMLError as e:
        raise _syntax(e) from None
    except (ValueError, OverflowError, RecursionError, TypeError) as e:
        # int() of a 5,000-digit number, a 13th month in a timestamp, ...
        raise YamlProblem(f"not valid YAML: {e}") from None
    finally:
        loader.dispose()


def measure_or_syntax(text: str) -> None:
    """measure(), with PyYAML's own syntax errors turned into YamlProblem."""
    try:
        measure(text)
    except yaml.YAMLError as e:
        raise _syntax(e) from None


def _syntax(e: yaml.YAMLError) -> YamlProblem:
    mark = getattr(e, "problem_mark", None)
    problem = getattr(e, "problem", None) or str(e)
    return YamlProblem(f"not valid YAML: {problem}", line=_mark_line(mark))


def lookup_line(lines: dict[NodePath, int], loc: NodePath) -> int | None:
    """The line of ``loc``, or of its nearest ancestor that has one."""
    for n in range(len(loc), -1, -1):
        if loc[:n] in lines:
            return lines[loc[:n]]
    return None
