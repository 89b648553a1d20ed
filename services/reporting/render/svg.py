"""A small SVG plotter for the HTML report: panels of lines with markers, error bars, linear,
log2 or log10 axes with ticks, grids and a legend, laid out in a grid, as text.

Drawn as SVG text rather than rasterised by matplotlib: a 10,000-run report's seven figures took
seconds of CPU there and take milliseconds here, and the browser draws them sharp at any zoom.
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass, field
from typing import Literal, Sequence

#: matplotlib's default colour cycle ("tab10"), so the plots look as they did and as readers expect.
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
           "#17becf")
FONT = 'font-family="sans-serif" font-size="11"'
Kind = Literal["linear", "log2", "log10"]


@dataclass(frozen=True)
class Line:
    """One line of a panel: points (x, y), optional error half-widths, style and legend label."""

    points: Sequence[tuple[float, float]]
    color: str
    label: str | None = None
    dash: str | None = None
    markers: bool = True
    yerr: Sequence[float] | None = None
    width: float = 1.5


@dataclass(frozen=True)
class Axis:
    kind: Kind = "linear"
    #: Where to put ticks; empty: chosen from the data range.
    ticks: Sequence[float] = ()
    label: str = ""
    #: Start a linear axis at zero (throughput).
    zero: bool = False


@dataclass(frozen=True)
class Panel:
    title: str
    lines: Sequence[Line]
    x: Axis = Axis()
    y: Axis = Axis()
    legend: Sequence[tuple[str, str, str | None]] = field(default_factory=tuple)  # (label, colour, dash)


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _fmt(v: float) -> str:
    a = abs(v)
    if a >= 1e6:
        return f"{v / 1e6:g}M"
    if a >= 1e4:
        return f"{v / 1e3:g}k"
    if a == 0 or a >= 1:
        return f"{v:g}"
    return f"{v:.3g}"


def nice_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    """About ``n`` round tick values covering [lo, hi]."""
    if hi <= lo:
        hi = lo + (abs(lo) or 1.0)
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    start = math.floor(lo / step) * step
    return [round(start + i * step, 12) for i in range(int(math.ceil((hi - start) / step)) + 1)]


def _log_ticks(lo: float, hi: float) -> list[float]:
    out, k = [], math.floor(math.log10(lo))
    while 10 ** k <= hi * 1.0001:
        out.extend(m * 10 ** k for m in ((1, 2, 5) if math.log10(hi / lo) < 3 else (1,)) if lo <= m * 10 ** k <= hi)
        k += 1
    return out or [lo, hi]


class _Scale:
    def __init__(self, axis: Axis, values: Sequence[float], length: float, flip: bool):
        self.kind, self.length, self.flip = axis.kind, length, flip
        vals = [v for v in values if math.isfinite(v) and (v > 0 or axis.kind == "linear")] or [1.0]
        lo, hi = min(vals), max(vals)
        if axis.kind == "linear":
            lo = 0.0 if axis.zero else lo
            ticks = list(axis.ticks) or nice_ticks(lo, hi)
            self.lo, self.hi = min(ticks[0], lo), max(ticks[-1], hi)
        else:
            if axis.kind == "log10":
                lo, hi = 10 ** math.floor(math.log10(lo)), 10 ** math.ceil(math.log10(hi))
            ticks = list(axis.ticks) or _log_ticks(lo, hi)
            self.lo, self.hi = min(ticks[0], lo), max(ticks[-1], hi)
            if axis.kind == "log2":  # a little room so the end markers are not cut
                self.lo, self.hi = self.lo / 2 ** 0.25, self.hi * 2 ** 0.25
        if self.hi <= self.lo:
            self.hi = self.lo + 1.0
        self.ticks = [t for t in ticks if self.lo <= t <= self.hi]

    def _t(self, v: float) -> float:
        if self.kind == "linear":
            return (v - self.lo) / (self.hi - self.lo)
        return (math.log(max(v, 1e-300)) - math.log(self.lo)) / (math.log(self.hi) - math.log(self.lo))

    def __call__(self, v: float) -> float:
        t = min(max(self._t(v), -0.05), 1.05)
        return (1 - t) * self.length if self.flip else t * self.length


def _panel(p: Panel, x0: float, y0: float, w: float, h: float) -> list[str]:
    left, right, top, bottom = 52.0, 8.0, 20.0, 30.0
    pw, ph = w - left - right, h - top - bottom
    xs = [x for line in p.lines for x, _ in line.points]
    ys = [y + (e if line.yerr else 0) for line in p.lines for (_, y), e in
          zip(line.points, line.yerr or [0.0] * len(line.points))]
    ys += [y for line in p.lines for _, y in line.points]
    sx, sy = _Scale(p.x, xs, pw, False), _Scale(p.y, ys, ph, True)
    ox, oy = x0 + left, y0 + top
    out = [f'<text x="{ox + pw / 2:.1f}" y="{y0 + 13:.1f}" text-anchor="middle" {FONT} font-weight="bold">'
           f"{_e(p.title)}</text>",
           f'<rect x="{ox:.1f}" y="{oy:.1f}" width="{pw:.1f}" height="{ph:.1f}" fill="none" stroke="#999"/>']
    for t in sx.ticks:
        x = ox + sx(t)
        out.append(f'<line x1="{x:.1f}" y1="{oy:.1f}" x2="{x:.1f}" y2="{oy + ph:.1f}" stroke="#e4e4e4"/>'
                   f'<text x="{x:.1f}" y="{oy + ph + 12:.1f}" text-anchor="middle" {FONT}>{_fmt(t)}</text>')
    for t in sy.ticks:
        y = oy + sy(t)
        out.append(f'<line x1="{ox:.1f}" y1="{y:.1f}" x2="{ox + pw:.1f}" y2="{y:.1f}" stroke="#e4e4e4"/>'
                   f'<text x="{ox - 4:.1f}" y="{y + 4:.1f}" text-anchor="end" {FONT}>{_fmt(t)}</text>')
    if p.x.label:
        out.append(f'<text x="{ox + pw / 2:.1f}" y="{oy + ph + 26:.1f}" text-anchor="middle" {FONT}>{_e(p.x.label)}</text>')
    if p.y.label:
        cx, cy = x0 + 11, oy + ph / 2
        out.append(f'<text x="{cx:.1f}" y="{cy:.1f}" text-anchor="middle" transform="rotate(-90 {cx:.1f} {cy:.1f})" '
                   f"{FONT}>{_e(p.y.label)}</text>")
    for line in p.lines:
        pts = [(ox + sx(x), oy + sy(y)) for x, y in line.points
               if math.isfinite(y) and (y > 0 or p.y.kind == "linear")]
        if not pts:
            continue
        dash = f' stroke-dasharray="{line.dash}"' if line.dash else ""
        out.append(f'<polyline fill="none" stroke="{line.color}" stroke-width="{line.width}"{dash} points="'
                   + " ".join(f"{x:.1f},{y:.1f}" for x, y in pts) + '"/>')
        if line.yerr:
            for (x, y), e in zip(line.points, line.yerr):
                if e > 0:
                    px, lo_, hi_ = ox + sx(x), oy + sy(y - e), oy + sy(y + e)
                    out.append(f'<path d="M{px:.1f} {lo_:.1f}V{hi_:.1f}M{px - 3:.1f} {lo_:.1f}h6M{px - 3:.1f} '
                               f'{hi_:.1f}h6" stroke="{line.color}" fill="none"/>')
        if line.markers:
            out.append("".join(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="2.5" fill="{line.color}"/>' for x, y in pts))
    for i, (label, color, dash) in enumerate(p.legend):
        y = oy + 10 + 12 * i
        d = f' stroke-dasharray="{dash}"' if dash else ""
        out.append(f'<line x1="{ox + 6:.1f}" y1="{y - 3:.1f}" x2="{ox + 24:.1f}" y2="{y - 3:.1f}" stroke="{color}" '
                   f'stroke-width="2"{d}/><text x="{ox + 28:.1f}" y="{y:.1f}" {FONT} font-size="10">{_e(label)}</text>')
    return out


def figure(panels: Sequence[Panel], *, cols: int = 2, panel_w: float = 440, panel_h: float = 260, title: str = "") -> str:
    """The panels in a grid, as one ``<svg>`` element."""
    cols = max(1, min(cols, len(panels) or 1))
    rows = max(1, math.ceil(len(panels) / cols))
    w, h = cols * panel_w, rows * panel_h
    parts = [f'<svg role="img" aria-label="{_e(title)}" viewBox="0 0 {w:.0f} {h:.0f}" '
             f'width="{w:.0f}" height="{h:.0f}"><rect width="100%" height="100%" fill="white"/>']
    for i, p in enumerate(panels):
        parts.extend(_panel(p, (i % cols) * panel_w, (i // cols) * panel_h, panel_w, panel_h))
    parts.append("</svg>")
    return "".join(parts)
