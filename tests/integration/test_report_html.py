"""`collector report`, `compare` and `history` against a real results DB holding synthetic
campaigns; the HTML report is opened in headless Chromium and its plots are checked on a screenshot."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from services.common.cli import EXIT_COLLAPSE
from bench.synthetic import synthetic_results, synthetic_spec
from services.common.store import Store
from services.scheduler.plan import run_specs

from tests.integration.fleet import ROOT
from tests.missing import missing

pytestmark = pytest.mark.integration

WORKLOADS = ["oltp_point_select", "oltp_read_only"]
THREADS = [1, 4, 16, 64, 256]
#: matplotlib's first three default line colours (tab:blue, tab:orange, tab:green): only the
#: plots draw them, the page's own styles use none of them.
PLOT_COLOURS = [(31, 119, 180), (255, 127, 14), (44, 160, 44)]


def _store_campaign(s, cid: str, *, collapse: str | None, seed: int) -> None:
    spec = synthetic_spec("synthetic", ["off", "8", "32"], WORKLOADS, THREADS, 3, duration=20, warmup=2)
    with Store(s) as store:
        store.campaigns.record(cid, spec, run_specs(spec, cid), now=1_700_000_000.0 + seed)
        for r in synthetic_results(spec, cid, seconds=20, seed=seed, collapse_target=collapse):
            store.results.store(r)


def _cli(s, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, BENCHFLEET_DB_NAME=s.db_name, BENCHFLEET_DB_HOST=s.db_host,
               BENCHFLEET_DB_PORT=str(s.db_port), BENCHFLEET_DB_USER=s.db_user, PYTHONPATH=str(ROOT))
    if s.db_password and "BENCHFLEET_DB_PASSWORD_FILE" not in env:
        env["BENCHFLEET_DB_PASSWORD"] = s.db_password
    return subprocess.run([sys.executable, "-m", "services.collector.cli", *args], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


def _chromium() -> str:
    path = shutil.which("chromium")
    if path is None:
        missing("chromium is not installed (deploy/ensure-services chromium)")
    return path


def _screenshot(html: Path, png: Path, tmp: Path, size: str = "1200,9000") -> None:
    profile = tmp / "chromium-profile"
    profile.mkdir()
    cmd = [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           f"--user-data-dir={profile}", f"--screenshot={png}", f"--window-size={size}", html.as_uri()]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert png.exists(), done.stderr[-2000:]


def _plot_bands(png: Path) -> tuple[int, list[tuple[int, int]]]:
    """Pixels in matplotlib's line colours, and the vertical bands (first row, last row) holding them."""
    from PIL import Image

    im = Image.open(png).convert("RGB")
    w, h = im.size
    px = im.load()
    total, rows = 0, []
    for y in range(0, h, 2):
        n = 0
        for x in range(0, w, 2):
            r, g, b = px[x, y]
            if any(abs(r - R) + abs(g - G) + abs(b - B) < 60 for R, G, B in PLOT_COLOURS):
                n += 1
        if n:
            rows.append(y)
        total += n
    bands: list[tuple[int, int]] = []
    for y in rows:
        if bands and y - bands[-1][1] <= 60:
            bands[-1] = (bands[-1][0], y)
        else:
            bands.append((y, y))
    return total, bands


def test_html_report_renders_its_plots_in_chromium(results_db, tmp_path):
    """The HTML report is one file with no network reference; in headless Chromium every plot
    (throughput and latency vs threads, throughput over time per workload) draws coloured lines."""
    _store_campaign(results_db, "synthetic-1", collapse="8", seed=1)
    out = tmp_path / "report.html"
    done = _cli(results_db, "report", "synthetic-1", "--html", str(out), "--mark-high-cv")
    assert done.returncode == 0, done.stderr
    page = out.read_text()
    assert "http://" not in page and "https://" not in page and "<script" not in page
    assert page.count('<figure id="plot-') == 2 + len(WORKLOADS)
    for heading in ("Settings", "Tables", "Collapse", "Plots"):
        assert f">{heading}</h2>" in page
    assert "key_cache_segments=8" in page and "8 / oltp_point_select / 256 threads" in page

    png = tmp_path / "shot.png"
    _screenshot(out, png, tmp_path)
    coloured, bands = _plot_bands(png)
    # Sampled on every other row and column; a page whose images fail to load has none at all.
    assert coloured > 1000, f"only {coloured} plot-coloured pixels: the plots did not render"
    # Each figure is its own block of coloured lines down the page (the over-time figures have
    # two rows of panels each, hence at least one band per figure).
    assert len(bands) >= 2 + len(WORKLOADS), bands


def test_report_in_every_format_and_fail_on_collapse(results_db, tmp_path):
    """text, markdown, csv, json and ods reports come out of the same campaign; --fail-on-collapse
    exits with EXIT_COLLAPSE when a target collapsed and 0 when none did."""
    _store_campaign(results_db, "synthetic-1", collapse="8", seed=1)
    _store_campaign(results_db, "synthetic-2", collapse=None, seed=2)
    text = _cli(results_db, "report", "synthetic-1", "--delta", "--fail-on-collapse")
    assert text.returncode == EXIT_COLLAPSE, text.stderr
    assert "collapsed cell" in text.stderr
    assert "     8 / off" in text.stdout and "-!" in text.stdout
    assert _cli(results_db, "report", "synthetic-2", "--fail-on-collapse").returncode == 0
    md = _cli(results_db, "report", "synthetic-1", "--format", "markdown", "--all-tables")
    assert md.returncode == 0 and "## 95th percentile transaction latency (ms) (absolute)" in md.stdout
    csv = _cli(results_db, "report", "synthetic-1", "--format", "csv", "--metric", "status:Key_reads")
    assert csv.returncode == 0 and csv.stdout.startswith("workload,target,baseline,threads")
    js = _cli(results_db, "report", "synthetic-1", "--format", "json")
    assert js.returncode == 0 and json.loads(js.stdout)["collapse"]
    ods = tmp_path / "r.ods"
    assert _cli(results_db, "report", "synthetic-1", "--format", "ods", "--out", str(ods)).returncode == 0
    assert ods.read_bytes()[:2] == b"PK"
    assert _cli(results_db, "report", "synthetic-1", "--format", "ods").returncode == 2


def test_compare_and_history_across_campaigns(results_db):
    """compare lines up the same cells of two campaigns (the collapsed 8 at 256 threads is far
    slower in A than in B), and history lists one cell in both campaigns, oldest first."""
    _store_campaign(results_db, "synthetic-1", collapse="8", seed=1)
    _store_campaign(results_db, "synthetic-2", collapse=None, seed=2)
    done = _cli(results_db, "compare", "synthetic-1", "synthetic-2")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("A = synthetic-1 (synthetic, finished)\nB = synthetic-2 (synthetic, finished)\n")
    section = done.stdout.split("target 8:")[1].split("target 32:")[0]
    assert any(line.startswith("  oltp_point_select") and line.rstrip().endswith("+") for line in section.splitlines())
    hist = _cli(results_db, "history", "--target", "8", "--workload", "oltp_point_select", "--threads", "256")
    assert hist.returncode == 0, hist.stderr
    lines = hist.stdout.splitlines()
    assert lines[0] == "History of 8 / oltp_point_select / 256 threads (q/s)"
    assert [l.split()[0] for l in lines[3:5]] == ["synthetic-1", "synthetic-2"]
    # The change against synthetic-1 marked faster, then its adjusted interval and q-value.
    assert lines[4].split()[-3].endswith("%+") and lines[4].split()[-2].count("%") == 2
