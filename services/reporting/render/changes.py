"""`collector history SPEC-NAME --changes` in text, markdown, CSV and JSON: one row per change point,
then the gate's verdict on the newest night."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

from services.reporting.spec_history import SpecChanges

COLUMNS = ["night", "campaign", "target", "workload", "threads", "metric", "before", "after", "change",
           "direction", "p", "q"]


def rows(c: SpecChanges) -> list[list[str]]:
    """One row of ``COLUMNS`` per change, oldest night first."""
    out = []
    for ch in sorted(c.search.changes, key=lambda ch: (c.night_number(ch.campaign_id), ch.key.metric,
                                                        ch.key.target, ch.key.workload, ch.key.threads)):
        k = ch.key
        out.append([str(c.night_number(ch.campaign_id)), ch.campaign_id, k.target, k.workload, str(k.threads),
                    k.metric, f"{ch.before:.4g}", f"{ch.after:.4g}", f"{(ch.ratio - 1) * 100:+.1f}%", ch.direction,
                    f"{ch.p:.2g}", f"{ch.q:.2g}"])
    return out


def _family(c: SpecChanges) -> str:
    s = c.search
    return (f"{s.family_size} splits tested over {s.series} series ({', '.join(c.metrics)} of every cell; E-Divisive "
            f"means, Student t corrected for the splits searched), Benjamini-Hochberg at a {s.alpha * 100:g}% "
            f"false-discovery rate: {len(s.changes)} change(s)")


def _gate(c: SpecChanges) -> list[str]:
    return c.gate.lines() if c.gate is not None else []


def render_changes_text(c: SpecChanges) -> str:
    """An aligned table of the changes, the family they were selected from, and the gate."""
    head = [f"Change points of {c.spec}: {len(c.nights)} campaigns, oldest first", ""]
    table = rows(c)
    if table:
        widths = [max(len(x) for x in col) for col in zip(COLUMNS, *table)]
        fmt = lambda r: "  ".join(x.ljust(w) for x, w in zip(r, widths)).rstrip()  # noqa: E731
        head += [fmt(COLUMNS)] + [fmt(r) for r in table]
    else:
        head.append("no change point")
    return "\n".join(head + ["", f" {_family(c)}",
                             " change: after/before, geometric means of the campaigns between neighbouring changes; "
                             "night: 1 is the oldest campaign"] + _gate(c)) + "\n"


def render_changes_markdown(c: SpecChanges) -> str:
    """The changes as a markdown table, the family and the gate as paragraphs."""
    lines = [f"## Change points of {c.spec}", "", f"{len(c.nights)} campaigns, oldest first.", ""]
    table = rows(c)
    if table:
        lines += ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
        lines += ["| " + " | ".join(r) + " |" for r in table]
    else:
        lines.append("No change point.")
    lines += ["", _family(c) + "."]
    if c.gate is not None:
        lines += ["", "```", *c.gate.lines(), "```"]
    return "\n".join(lines) + "\n"


def render_changes_csv(c: SpecChanges) -> str:
    """The changes as CSV: a header, one line per change (the gate goes to stderr and the exit code)."""
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(COLUMNS)
    w.writerows(rows(c))
    return out.getvalue()


def render_changes_json(c: SpecChanges) -> str:
    """The changes, the family and the gate as one JSON document."""
    s = c.search
    gate: dict[str, Any] | None = None
    if c.gate is not None:
        g = c.gate
        gate = {"newest": g.newest, "reference": g.reference, "beyond": g.beyond, "failed": g.failed,
                "regressions": [{"target": r.target, "workload": r.workload, "threads": r.threads, "ratio": r.ratio,
                                 "q": r.q, "low": r.low, "high": r.high, "level": r.level} for r in g.regressions]}
    changes = [{"night": c.night_number(ch.campaign_id), "campaign": ch.campaign_id, "target": ch.key.target,
                "workload": ch.key.workload, "threads": ch.key.threads, "metric": ch.key.metric,
                "before": ch.before, "after": ch.after, "ratio": ch.ratio, "direction": ch.direction, "p": ch.p,
                "q": ch.q} for ch in sorted(s.changes, key=lambda ch: c.night_number(ch.campaign_id))]
    return json.dumps({"spec": c.spec, "campaigns": [n.campaign_id for n in c.nights], "metrics": list(c.metrics),
                       "family": {"size": s.family_size, "series": s.series, "alpha": s.alpha},
                       "changes": changes, "gate": gate}, indent=1) + "\n"
