"""Study readings as templates: every measured number is a named cell of a table the page prints.

A reading (docs/studies/<study>.reading.md) writes ``{WORKLOAD/TARGET/THREADS@TABLE}`` where a
number goes; TABLE is ``<spec stem>/<mode>/<metric>`` of one report the page prints (for example
``{oltp_simple/10.11.19/8@builds/delta/qps}``). ``*`` in WORKLOAD, TARGET or THREADS with
``|min`` or ``|max`` picks the extreme of the matching cells; ``{marks@TABLE}`` names the cells the
table marks faster or slower (or says none is). The rendered reading holds the
value as the table prints it (with its marks) and names the cell it came from, so a claim
shows what it rests on and no number can be typed. Pure: tables come in already computed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Mapping

from services.common.errors import UsageError
from services.reporting.tables import Table, format_value

#: A cell reference in a reading template.
REFERENCE = re.compile(r"\{(?!marks@)(?P<cell>[^{}@|]+)@(?P<table>[^{}@|]+)(?:\|(?P<pick>min|max))?\}")
#: The significance marks of a whole table: ``{marks@TABLE}``.
MARKS = re.compile(r"\{marks@(?P<table>[^{}@|]+)\}")
#: A number as prose writes it: 1,000,000, -14.72, 10.11.19 (each part), 003.
NUMBER = re.compile(r"(?<![\w.])-?\d[\d,]*(?:\.\d+)?")


class ReadingError(UsageError):
    """A reading names a table or a cell the page's reports do not hold."""


@dataclass(frozen=True)
class CellRef:
    """One named cell (or a pick over several) of one report table."""

    table: str
    workload: str
    target: str
    threads: str
    pick: str | None = None

    @property
    def name(self) -> str:
        return f"{self.workload}/{self.target}/{self.threads}@{self.table}" + (f"|{self.pick}" if self.pick else "")


@dataclass(frozen=True)
class Resolved:
    """A reference's value as the table prints it and the cell it came from."""

    ref: CellRef
    text: str
    cell: str


def parse(template: str) -> list[CellRef]:
    """Every cell reference of ``template``, in order; a malformed one raises ReadingError."""
    out = []
    for m in REFERENCE.finditer(template):
        parts = m["cell"].strip().split("/")
        if len(parts) != 3:
            raise ReadingError(f"reading: {{{m['cell']}@{m['table']}}}: a cell is WORKLOAD/TARGET/THREADS")
        wildcard = "*" in parts
        if wildcard != bool(m["pick"]):
            raise ReadingError(f"reading: {{{m.group()[1:-1]}}}: '*' needs |min or |max, and |min or |max needs '*'")
        out.append(CellRef(m["table"].strip(), *parts, pick=m["pick"]))
    return out


def _matches(ref: CellRef, table: Table) -> list[tuple[str, float, str]]:
    """(cell name, value, printed text) of every cell of ``table`` that ``ref`` names, with data."""
    out = []
    for row in table.rows:
        if ref.workload not in ("*", row.workload) or ref.target not in ("*", row.target):
            continue
        for threads, cell in zip(table.threads, row.cells):
            if ref.threads in ("*", str(threads)) and cell.value is not None:
                out.append((f"{row.workload}/{row.target}/{threads}", cell.value,
                            format_value(cell, table.places) + cell.mark))
    return out


def resolve(ref: CellRef, tables: Mapping[str, Table]) -> Resolved:
    """The value ``ref`` names; ReadingError naming the reference when the table or cell is missing."""
    table = tables.get(ref.table)
    if table is None:
        raise ReadingError(f"reading: {{{ref.name}}}: no table {ref.table!r} on the page "
                           f"(tables: {', '.join(sorted(tables)) or 'none'})")
    found = _matches(ref, table)
    if not found:
        raise ReadingError(f"reading: {{{ref.name}}}: no cell with data in table {ref.table}")
    if ref.pick is None:
        if len(found) > 1:
            raise ReadingError(f"reading: {{{ref.name}}}: names {len(found)} cells")
        name, _, text = found[0]
    else:
        name, _, text = (min if ref.pick == "min" else max)(found, key=lambda f: f[1])
    return Resolved(ref, text, name)


def marks(name: str, tables: Mapping[str, Table]) -> str:
    """Which cells of table ``name`` are marked faster (+) or slower (-), by name (the table's verdicts,
    false discoveries controlled over its page)."""
    table = tables.get(name)
    if table is None:
        raise ReadingError(f"reading: {{marks@{name}}}: no table {name!r} on the page "
                           f"(tables: {', '.join(sorted(tables)) or 'none'})")
    found: dict[str, list[str]] = {"+": [], "-": []}
    for row in table.rows:
        for threads, cell in zip(table.threads, row.cells):
            for mark in found:
                if mark in cell.mark:
                    found[mark].append(f"`{row.workload}/{row.target}/{threads}`")
    if not any(found.values()):
        return f"no cell of `{name}` is marked faster or slower"
    return "; ".join(f"marked `{mark}` in `{name}`: {', '.join(cells)}" for mark, cells in found.items() if cells)


def render(template: str, tables: Mapping[str, Table]) -> str:
    """``template`` with each reference replaced by its value and the cell it rests on."""
    parse(template)  # malformed references fail before anything is filled in
    template = MARKS.sub(lambda m: marks(m["table"].strip(), tables), template)

    def fill(m: re.Match[str]) -> str:
        ref = parse(m.group())[0]
        r = resolve(ref, tables)
        where = r.cell if ref.pick is None else f"{ref.pick} of {ref.workload}/{ref.target}/{ref.threads}: {r.cell}"
        return f"{r.text} <sub>[`{where}` in `{ref.table}`]</sub>"

    return REFERENCE.sub(fill, template)


def numbers(text: str) -> set[str]:
    """The numbers ``text`` writes, without sign or thousands separators."""
    return {m.group().replace(",", "").lstrip("-") for m in NUMBER.finditer(text)}


def typed_numbers(template: str, inputs: Iterable[str]) -> list[str]:
    """Numbers a template writes outside its cell references that no input (the study's specs
    and seeds, what was asked rather than measured) holds: numbers typed by hand."""
    allowed: set[str] = set()
    for text in inputs:
        allowed |= numbers(text)
    return sorted(numbers(MARKS.sub(" ", REFERENCE.sub(" ", template))) - allowed)
