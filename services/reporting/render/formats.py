"""The same comparison table as Markdown and CSV, and the settings block printed above it.

Everything takes plain data (a ``Table``, a dict), so it depends on neither the store nor the bus.
"""

from __future__ import annotations

import csv
import io
import math
import re
from typing import Any, Mapping

from services.common.spec.durations import parse_duration
from services.common.spec.windows import at_threads, workload_windows
from services.common.spec.server_options import HIDDEN_VALUE, is_secret_name
from services.reporting.tables import (
    NO_DATA,
    Table,
    failed_lines,
    format_value,
    formula_lines,
    left_out_lines,
    legend_lines,
    verdict_note,
)

CSV_COLUMNS = (
    "workload", "target", "baseline", "threads", "mode", "value", "mark", "verdict",
    "n", "mean", "stdev", "cv", "baseline_n", "baseline_mean",
    "ratio", "ratio_low", "ratio_high", "t", "df", "p", "failed_runs", "stalled_runs",
    "method", "log_ratio", "q", "interval_level", "adjusted_low", "adjusted_high",
    "excluded_runs", "excluded_reason",
)  # fmt: skip


def _md_escape(text: str) -> str:
    # A bare `*`, `~` or `|` would start emphasis or strikethrough, or split a cell, in GitHub's Markdown.
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("*", "\\*").replace("~", "\\~")


def md_text(text: str) -> str:
    """User text (a description, names) for a Markdown page: no raw HTML, links or emphasis,
    whatever it holds; GitHub shows the characters as written."""
    text = re.sub(r"([\\`*~\[\]<>|&])", r"\\\1", text)
    # A `_` inside a word (key_buffer_size) starts no emphasis in CommonMark: only the others are escaped.
    text = re.sub(r"(?<![^\W_])_|_(?![^\W_])", r"\\_", text)
    text = re.sub(r"^(\s*)([#=+-])", r"\1\\\2", text, flags=re.M)  # no heading, rule or list from a line's start
    return re.sub(r"^(\s*\d+)([.)])", r"\1\\\2", text, flags=re.M)  # nor an ordered list ("1." or "1)")


def render_markdown(table: Table, notes: str = "") -> list[str]:
    """The table as a GitHub Markdown table with the same numbers and marks, then notes; each judged
    cell links a footnote with its verdict (``notes`` keeps the footnote names of a page's tables apart)."""
    spec = table.spec
    prefix = re.sub(r"[^A-Za-z0-9_-]", "-", notes) + "-" if notes else ""
    footnotes: list[str] = []
    head = ["sysbench test"] + (["target"] if spec.grouped else []) + [str(t) for t in table.threads]
    align = [":---"] * (len(head) - len(table.threads)) + ["---:"] * len(table.threads)
    lines = ["Columns: number of threads.", "", "| " + " | ".join(head) + " |", "| " + " | ".join(align) + " |"]
    for row in table.rows:
        label = [row.workload] + ([row.label] if spec.grouped else [])
        cells = []
        for threads, c in zip(table.threads, row.cells):
            # The footnote sits between the number and its marks, so a row still ends in its marks.
            name = ""
            if c.verdict is not None and c.value is not None:
                name = f"[^{prefix}{len(footnotes) + 1}]"
                footnotes.append(f"{name}: {_md_escape(f'{row.label.strip()} / {threads}: ' + verdict_note(c.verdict))}")
            cells.append(_md_escape(format_value(c, table.places)) + name + _md_escape(c.mark))
        lines.append("| " + " | ".join([_md_escape(x) for x in label] + cells) + " |")
    lines.append("")
    lines.extend(f"`{f}`  " for f in formula_lines(spec))
    lines.append("")
    for mark, text in legend_lines(table):
        lines.append(f"- `{mark}` {_md_escape(text)}" if mark else f"- {_md_escape(text)}")
    for note in (failed_lines(table), left_out_lines(table)):
        if note:
            lines.append("")
            lines.append(_md_escape(note[0]))
            lines.extend(f"- {_md_escape(x.strip())}" for x in note[1:])
    if footnotes:
        lines += [""] + footnotes
    return lines


def _num(x: float | None) -> str:
    if x is None or math.isnan(x):
        return ""
    return f"{x:.10g}"


def render_csv(table: Table) -> list[str]:
    """One CSV line per cell (long format, for spreadsheets and pivots) with value, mark and statistics."""
    spec = table.spec
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for row in table.rows:
        for threads, cell in zip(table.threads, row.cells):
            own, comp, v = cell.stats, cell.comparison, cell.verdict
            base = comp.baseline if comp else None
            # t, df, p and the unadjusted interval are the verdict's own log-ratio test's.
            test = v.estimate if v else None
            low, high = test.interval(1 - spec.alpha) if test else (None, None)
            decision = v.decision if v else ("" if cell.value is not None else NO_DATA)
            writer.writerow([
                row.workload, row.target, spec.baseline, threads, spec.mode,
                "" if cell.value is None else format_value(cell, table.places), cell.mark, decision,
                own.n if own else 0, _num(own.mean if own else None), _num(own.stdev if own else None),
                _num(own.cv if own else None), base.n if base else "", _num(base.mean if base else None),
                _num(comp.ratio if comp else None), _num(low), _num(high), _num(test.t if test else None),
                _num(test.df if test else None), _num(test.p if test else None), cell.failed, cell.stalled,
                v.estimate.method if v else "", _num(v.estimate.estimate if v else None), _num(v.q if v else None),
                _num(v.level if v else None), _num(v.low if v else None), _num(v.high if v else None),
                cell.excluded, cell.excluded_reason,
            ])  # fmt: skip
    return out.getvalue().splitlines()


def _duration(seconds: float) -> str:
    """Seconds in the seeds' words: ``15 minutes``, ``90 seconds``, ``1 hour``."""
    for size, unit in ((3600, "hour"), (60, "minute"), (1, "second")):
        if seconds >= size and seconds % size == 0:
            n = int(seconds // size)
            return f"{n} {unit}{'s' if n != 1 else ''}"
    return f"{seconds:g} seconds"


def run_lengths(settings: Mapping[str, Any]) -> list[str]:
    """How long each test warmed up and measured: one sentence when every run did the same, else
    the windows by test and thread count (``duration_by_threads``, ``warmup_by_threads``, and a
    workload's own)."""
    repeat = int(settings.get("repeat", 1))
    times = "once" if repeat == 1 else f"{repeat} times"
    duration = parse_duration(settings["duration"])
    warmup = parse_duration(settings.get("warmup", 0) or 0)

    def by_threads(fields: Mapping[str, Any]) -> tuple[dict[int, float], dict[int, float]]:
        """A spec's (or a workload's) windows and warm-ups by thread count."""
        return tuple({int(k): parse_duration(v) for k, v in (fields.get(name) or {}).items()}  # type: ignore[return-value]
                     for name in ("duration_by_threads", "warmup_by_threads"))

    # A workload is its name or its fields (keyed by its label, else its name).
    fields = [w if isinstance(w, Mapping) else {"name": str(w)} for w in settings.get("workloads") or []]
    workloads = {str(w.get("label") or w.get("name")): by_threads(w) for w in fields}
    shared = by_threads(settings)
    if not any(shared) and not any(d or w for d, w in workloads.values()):
        text = f"Each test was run {times} for {_duration(duration)}"
        return [text + (f" with {_duration(warmup)} warm-up." if warmup else " without warm-up.")]

    def windows(workload: str, threads: int) -> tuple[float, float]:
        own_d, own_w = workloads.get(workload, ({}, {}))
        return (at_threads(threads, warmup, shared[1], own_w), at_threads(threads, duration, shared[0], own_d))

    threads = [int(t) for t in settings.get("threads") or []]
    groups = workload_windows(list(workloads), threads, windows)
    if len(groups) == 1:
        return [f"Each test was run {times}: {groups[0][1]}."]
    return [f"Each test was run {times}:"] + [f"  {', '.join(keys)}: {text}" for keys, text in groups]


def _is_secret(key: str) -> bool:
    # Reports are shared; a password (or where to find one) never belongs in them.
    return is_secret_name(key)


def _setting_items(target: Mapping[str, Any]) -> list[str]:
    items = []
    for key, value in target.items():
        if key == "name" or value is None or _is_secret(key):
            continue
        if isinstance(value, Mapping):
            # Server options ({"key_buffer_size": "400M"}) read best without a prefix; any other
            # block keeps its name (a bare "enabled=False" of quiesce reads as a disabled target).
            prefix = "" if key == "options" else f"{key}."
            # A secret option reads "hidden": the reader learns it was set, never its value.
            items.extend(f"{prefix}{k}={HIDDEN_VALUE if _is_secret(k) else v}" for k, v in value.items()
                         if v is not None)
        elif isinstance(value, (list, tuple)):
            items.append(f"{key}={','.join(str(v) for v in value)}")
        else:
            items.append(f"{key}={value}")
    return items


def render_settings(settings: Mapping[str, Any]) -> list[str]:
    """The settings block printed above a table: targets with their settings, data shape, timing.

    ``settings`` is plain data, e.g. ``CampaignSpec.model_dump(mode="json")``: keys ``name``,
    ``description``, ``targets`` (dicts with ``name``), ``baseline``, ``data``, ``duration``,
    ``warmup``, ``repeat`` (durations in seconds or as ``15m``); missing keys are left out.
    """
    lines = []
    if settings.get("name"):
        lines.append(f"Campaign: {settings['name']}")
    if settings.get("description"):
        lines.append(str(settings["description"]))
    targets = list(settings.get("targets") or [])
    baseline = settings.get("baseline") or (targets[0].get("name") if targets else None)
    if targets:
        lines.append(f"Targets (baseline: {baseline}):")
        width = max(len(str(t.get("name", ""))) for t in targets)
        for t in targets:
            lines.append(f"  {str(t.get('name', '')).ljust(width)}  {' '.join(_setting_items(t))}".rstrip())
    data = settings.get("data")
    if data:
        tables, size = data.get("tables", 1), data.get("table_size")
        shape = f"{tables} table{'s' if tables != 1 else ''}"
        if size is not None:
            shape += f" x {size} rows"
        lines.append(f"Table shape: {shape}" + (f", {data['engine']}" if data.get("engine") else ""))
    if "duration" in settings:
        lines.extend(run_lengths(settings))
    hosts = int(settings.get("load_hosts", 1) or 1)
    if hosts > 1:
        lines.append(f"Each run was driven from {hosts} load hosts at once (load_hosts: {hosts}), its parts "
                     "started at one agreed instant and merged into one result.")
    return lines
