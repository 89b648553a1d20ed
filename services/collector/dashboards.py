"""Grafana dashboards as plain dicts, generated from the metric names the fleet exports.

Plain JSON on purpose: grafana-foundation-sdk (11.6.0) does emit valid ``timeseries``
panels, but it is a 5 MB dependency for what a few small builders below do. Every board is
checked against Grafana's JSON schemas and every Prometheus query is run against a real
Prometheus in the test suite. Pure: ``write_dashboards`` is the only I/O.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Iterator

#: Datasources by template variable, not by uid: a board imported into any Grafana asks which
#: Prometheus and which MySQL datasource to use (the first of each type by default).
PROMETHEUS_VAR, MYSQL_VAR = "datasource", "results_db"
PROMETHEUS = {"type": "prometheus", "uid": f"${{{PROMETHEUS_VAR}}}"}
MYSQL = {"type": "mysql", "uid": f"${{{MYSQL_VAR}}}"}
SCHEMA_VERSION = 39
RUN_SELECTOR = 'campaign=~"$campaign",target=~"$target",workload=~"$workload"'

Panel = dict[str, Any]


class _Layout:
    """Hands out panel ids and grid positions left to right, top to bottom (24 columns)."""

    def __init__(self) -> None:
        self.next_id, self.x, self.y, self.row_h = 1, 0, 0, 0

    def place(self, panel: Panel, w: int, h: int) -> Panel:
        if self.x + w > 24:
            self.x, self.y, self.row_h = 0, self.y + self.row_h, 0
        panel["id"], panel["gridPos"] = self.next_id, {"h": h, "w": w, "x": self.x, "y": self.y}
        self.next_id += 1
        self.x += w
        self.row_h = max(self.row_h, h)
        return panel


def _prom(expr: str, legend: str = "__auto", ref: str = "A", *, instant: bool = False) -> dict[str, Any]:
    target: dict[str, Any] = {"refId": ref, "datasource": PROMETHEUS, "expr": expr, "legendFormat": legend,
                              "editorMode": "code", "range": not instant, "instant": instant}
    if instant:
        target["format"] = "table"
    return target


def _sql(sql: str, ref: str = "A", fmt: str = "table") -> dict[str, Any]:
    return {"refId": ref, "datasource": MYSQL, "format": fmt, "rawQuery": True, "editorMode": "code",
            "rawSql": " ".join(sql.split())}


def timeseries(title: str, targets: list[dict[str, Any]], unit: str, description: str = "") -> Panel:
    return {
        "type": "timeseries", "title": title, "description": description, "datasource": PROMETHEUS,
        "targets": targets,
        "fieldConfig": {"defaults": {"unit": unit, "min": 0,
                                     "custom": {"drawStyle": "line", "lineWidth": 1, "fillOpacity": 10,
                                                "showPoints": "never", "spanNulls": False}},
                        "overrides": []},
        "options": {"legend": {"displayMode": "table", "placement": "bottom", "showLegend": True,
                               "calcs": ["mean", "lastNotNull"]},
                    "tooltip": {"mode": "multi", "sort": "desc"}},
    }


def stat(title: str, targets: list[dict[str, Any]], unit: str, description: str = "") -> Panel:
    return {
        "type": "stat", "title": title, "description": description, "datasource": PROMETHEUS,
        "targets": targets,
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "options": {"graphMode": "none", "colorMode": "value", "justifyMode": "auto", "textMode": "value_and_name",
                    "wideLayout": True, "showPercentChange": False, "percentChangeColorMode": "standard",
                    "orientation": "auto", "reduceOptions": {"calcs": ["lastNotNull"], "values": False}},
    }


def table(title: str, targets: list[dict[str, Any]], datasource: dict[str, str], description: str = "",
          transformations: list[dict[str, Any]] | None = None) -> Panel:
    return {
        "type": "table", "title": title, "description": description, "datasource": datasource,
        "targets": targets, "transformations": transformations or [],
        "fieldConfig": {"defaults": {}, "overrides": []},
        "options": {"frameIndex": 0, "showHeader": True, "cellHeight": "sm",
                    "footer": {"show": False, "reducer": ["sum"]}},
    }


def barchart(title: str, targets: list[dict[str, Any]], x_field: str, unit: str, description: str = "",
             transformations: list[dict[str, Any]] | None = None) -> Panel:
    return {
        "type": "barchart", "title": title, "description": description, "datasource": PROMETHEUS,
        "targets": targets, "transformations": transformations or [],
        "fieldConfig": {"defaults": {"unit": unit, "custom": {"fillOpacity": 80, "lineWidth": 1}}, "overrides": []},
        "options": {"xField": x_field, "orientation": "vertical", "xTickLabelRotation": 0, "xTickLabelMaxLength": 0,
                    "stacking": "none", "showValue": "never", "barWidth": 0.9, "groupWidth": 0.8,
                    "fullHighlight": False,
                    "legend": {"displayMode": "list", "placement": "bottom", "showLegend": True, "calcs": []},
                    "tooltip": {"mode": "multi", "sort": "none"}},
    }


def _query_var(name: str, query: str, datasource: dict[str, str], *, multi: bool) -> dict[str, Any]:
    var: dict[str, Any] = {"type": "query", "name": name, "label": name, "datasource": datasource,
                           "query": query, "definition": query, "refresh": 2, "sort": 7,
                           "multi": multi, "includeAll": multi}
    if multi:
        # Regex-matched, so "All" must be a regex rather than Grafana's list of every value.
        var["allValue"] = ".*"
        var["current"] = {"text": "All", "value": "$__all"}
    return var


def _datasource_var(name: str, label: str, plugin: str) -> dict[str, Any]:
    """A datasource template variable: the datasource of type ``plugin`` the viewer picks."""
    return {"type": "datasource", "name": name, "label": label, "query": plugin, "regex": "", "hide": 0,
            "refresh": 1, "multi": False, "includeAll": False, "options": [],
            # Empty: Grafana selects the first datasource of the type when the board opens.
            "current": {"text": "", "value": ""}}


#: Each run's warm-up and measurement as a region, from the results DB: what ran when, beside
#: the live curves. ``$campaign`` is the campaign id on every board that has it.
RUNS_ANNOTATION_SQL = """
SELECT started_at * 1000 AS time, ended_at * 1000 AS timeend,
       CONCAT(target, ' ', workload, ' ', threads, ' threads, repetition ', repetition, ': ', status,
              ' on ', worker) AS text,
       CONCAT(target, ',', workload) AS tags
FROM results WHERE campaign_id = '$campaign' ORDER BY started_at
"""


def _sql_annotation(name: str, sql: str, color: str) -> dict[str, Any]:
    return {"name": name, "datasource": MYSQL, "enable": True, "hide": False, "iconColor": color,
            "target": {"refId": "Anno", "datasource": MYSQL, "format": "table", "rawQuery": True, "editorMode": "code",
                       "rawSql": " ".join(sql.split())}}


def _runs_annotation() -> dict[str, Any]:
    return _sql_annotation("Runs", RUNS_ANNOTATION_SQL, "rgba(255, 152, 48, 1)")


def _dashboard(uid: str, title: str, panels: list[Panel], variables: list[dict[str, Any]], *,
               refresh: str, time_from: str, description: str, run_annotations: bool = False,
               extra_annotations: tuple[dict[str, Any], ...] = ()) -> dict[str, Any]:
    # Datasource variables first: the query variables and panels refer to them.
    used = json.dumps([panels, variables])
    sources = [_datasource_var(PROMETHEUS_VAR, "Prometheus", "prometheus")] if PROMETHEUS["uid"] in used else []
    if MYSQL["uid"] in used or run_annotations or extra_annotations:
        sources.append(_datasource_var(MYSQL_VAR, "Results DB", "mysql"))
    annotations: list[dict[str, Any]] = [{"builtIn": 1, "datasource": {"type": "grafana", "uid": "-- Grafana --"},
                                          "enable": True, "hide": True, "iconColor": "rgba(0, 211, 255, 1)",
                                          "name": "Annotations & Alerts", "type": "dashboard"}]
    if run_annotations:
        annotations.append(_runs_annotation())
    annotations += extra_annotations
    return {
        "uid": uid, "title": title, "description": description, "tags": ["benchfleet"],
        "timezone": "browser", "editable": True, "graphTooltip": 1, "schemaVersion": SCHEMA_VERSION,
        "time": {"from": time_from, "to": "now"}, "refresh": refresh, "links": [],
        "templating": {"list": sources + variables},
        "annotations": {"list": annotations},
        "panels": panels,
    }


def _alerts_table(layout: _Layout, match: str) -> Panel:
    expr = f'sum by (alertname, alertstate, campaign, target, workload, instance) (ALERTS{{alertname=~"Benchfleet.*"{match}}})'
    return layout.place(table("Alert state", [_prom(expr, instant=True)], PROMETHEUS,
                              "Benchfleet alerts pending or firing in Prometheus (deploy/prometheus/rules.yml).",
                              [{"id": "organize", "options": {"excludeByName": {"Time": True, "Value": True}}}]), 24, 6)


def campaign_live() -> dict[str, Any]:
    """Runs as they happen: throughput, latency, errors and progress per target."""
    lay, sel = _Layout(), RUN_SELECTOR
    by = "target, threads"
    lat = lambda q, ref: _prom(  # noqa: E731
        f"histogram_quantile({q}, sum by (target, threads, le) "
        f"(rate(benchfleet_worker_transaction_latency_seconds_bucket{{{sel}}}[$__rate_interval])))",
        f"p{round(q * 100)} {{{{target}}}} {{{{threads}}}}", ref)
    panels = [
        lay.place(stat("Run progress", [_prom(f"benchfleet_worker_run_progress_ratio{{{sel}}}",
                                              "{{target}} {{workload}} {{threads}}")], "percentunit",
                       "Share of warm-up plus measurement done, per active run."), 12, 5),
        lay.place(stat("Workers", [_prom('sum(up{job="benchfleet-worker"})', "up"),
                                   _prom("sum(benchfleet_worker_busy)", "busy", "B")], "none"), 6, 5),
        lay.place(stat("Threads", [_prom(f"max by (target) (benchfleet_worker_run_threads{{{sel}}})",
                                         "{{target}}")], "none", "Client connections of the active runs."), 6, 5),
        lay.place(timeseries("Queries per second", [_prom(
            f"sum by ({by}) (benchfleet_worker_queries_per_second{{{sel}}})", "{{target}} {{threads}}")],
            "reqps", "As the load engine measured each second."), 12, 9),
        lay.place(timeseries("Transactions per second", [_prom(
            f"sum by ({by}) (benchfleet_worker_transactions_per_second{{{sel}}})", "{{target}} {{threads}}")],
            "reqps"), 12, 9),
        lay.place(timeseries("Transaction latency", [lat(0.5, "A"), lat(0.95, "B"), lat(0.99, "C"), _prom(
            f"max by (target, threads, percentile) (benchfleet_worker_interval_latency_seconds{{{sel}}})",
            "p{{percentile}} of the second {{target}} {{threads}}", "D")], "s",
            "Percentiles from the native driver's latency histogram (since measurement began); with driver: "
            "sysbench, the percentile sysbench printed for each second (its --percentile, of that second alone)."),
            12, 9),
        lay.place(timeseries("Errors per second", [_prom(
            f"sum by (target, code) (rate(benchfleet_worker_errors_total{{{sel}}}[$__rate_interval]))",
            "{{target}} {{code}}")], "reqps", "Failed statements by server error code."), 12, 9),
        lay.place(timeseries("Reconnects per second", [_prom(
            f"sum by (target) (rate(benchfleet_worker_reconnects_total{{{sel}}}[$__rate_interval]))",
            "{{target}}")], "reqps"), 12, 7),
        lay.place(timeseries("Queries per second by kind", [_prom(
            f"sum by (target, kind) (rate(benchfleet_worker_queries_total{{{sel}}}[$__rate_interval]))",
            "{{target}} {{kind}}")], "reqps"), 12, 7),
        lay.place(timeseries("Stalled seconds", [_prom(
            f"sum by ({by}) (increase(benchfleet_worker_stalled_seconds_total{{{sel}}}[$__rate_interval]))",
            "{{target}} {{threads}}")], "s",
            "Measured seconds in which no transaction completed; reports mark such runs with ~ and "
            "BenchfleetTransactionStall fires past benchfleet:transaction_stall_seconds_threshold."), 24, 7),
    ]
    panels.append(_alerts_table(lay, ""))
    variables = [
        _query_var("campaign", "label_values(benchfleet_worker_queries_total, campaign)", PROMETHEUS, multi=False),
        _query_var("target", 'label_values(benchfleet_worker_queries_total{campaign=~"$campaign"}, target)',
                   PROMETHEUS, multi=True),
        _query_var("workload", 'label_values(benchfleet_worker_queries_total{campaign=~"$campaign"}, workload)',
                   PROMETHEUS, multi=True),
    ]
    return _dashboard("benchfleet-campaign-live", "Benchfleet: campaign live", panels, variables,
                      refresh="5s", time_from="now-30m", description="Live view of the runs of a campaign.",
                      run_annotations=True)


def _per_series(metric: str, selector: str) -> str:
    """``metric`` with a ``series`` label: its target, or TARGET@POOL in a campaign on several pools
    (whose pools are cells of their own: one column per target would mix them)."""
    return (f'label_replace(label_join({metric}{{{selector}}}, "series", "@", "target", "pool"),'
            ' "series", "$1", "series", "(.*)@")')


def throughput_vs_threads() -> dict[str, Any]:
    """Finished cells from the collector: q/s against thread count, one series per target (and pool)."""
    lay = _Layout()
    cell = 'campaign="$campaign",workload=~"$workload"'
    # Instant table rows (threads, series, value) pivoted to one column per series, x = threads.
    pivot = [
        {"id": "groupingToMatrix", "options": {"rowField": "threads", "columnField": "series", "valueField": "Value"}},
        {"id": "convertFieldType", "options": {"conversions": [{"targetField": "threads\\series", "destinationType": "number"}]}},
        {"id": "sortBy", "options": {"sort": [{"field": "threads\\series"}]}},
    ]
    panels = [
        lay.place(barchart("Queries per second vs threads ($workload)",
                           [_prom(_per_series("benchfleet_cell_queries_per_second", cell), instant=True)],
                           "threads\\series", "reqps", "Mean over repetitions of each finished cell; a campaign on "
                           "several pools has one series per target and pool (TARGET@POOL).", pivot), 24, 10),
        lay.place(barchart("Transactions per second vs threads ($workload)",
                           [_prom(_per_series("benchfleet_cell_transactions_per_second", cell), instant=True)],
                           "threads\\series", "reqps", transformations=pivot), 24, 10),
        lay.place(table("Collapse ratio", [_prom(
            'benchfleet_collapse_ratio{campaign="$campaign",workload=~"$workload"}', instant=True)], PROMETHEUS,
            "q/s at the highest thread count over the peak at lower counts; below "
            "benchfleet:collapse_fraction the collapse alert fires.",
            [{"id": "organize", "options": {"excludeByName": {"Time": True, "__name__": True}}}]), 24, 7),
    ]
    for p in panels[:2]:
        p["repeat"], p["repeatDirection"] = "workload", "v"
    panels.append(_alerts_table(lay, ', campaign=~"$campaign"'))
    variables = [
        _query_var("campaign", "label_values(benchfleet_cell_queries_per_second, campaign)", PROMETHEUS, multi=False),
        _query_var("workload", 'label_values(benchfleet_cell_queries_per_second{campaign="$campaign"}, workload)',
                   PROMETHEUS, multi=True),
    ]
    return _dashboard("benchfleet-throughput-threads", "Benchfleet: throughput vs threads", panels, variables,
                      refresh="1m", time_from="now-24h", description="Finished cells of a campaign, per target.")


#: What a cell_stats row's empty verdict means: the baseline's own row, or a campaign whose cells
#: were not judged together since their figures last changed (services/collector/statistics.py).
_VERDICT = ("CASE WHEN s.target = s.baseline THEN 'baseline' WHEN s.verdict IS NULL AND s.ratio IS NOT NULL"
            " THEN 'not judged yet' ELSE s.verdict END AS verdict")
#: Mean q/s per cell and its ratio to the campaign's baseline target, with the decision, q-value and
#: adjusted interval the collector stored in cell_stats (tables and views in common/schema.py).
#: A campaign on several pools has a row per pool (results.pool; cell_stats.pool, '' for one pool),
#: each judged as that pool's report judges it; a one-pool campaign's rows name its pool.
RESULTS_SQL = f"""
SELECT COALESCE(NULLIF(m.pool, ''), c.pool) AS pool, m.workload, m.threads, m.target, m.qps, m.tps, m.repetitions,
       s.ratio AS ratio_to_baseline, {_VERDICT}, s.q_value AS q, s.interval_low, s.interval_high, s.mark,
       s.excluded_runs, s.cv
FROM (SELECT campaign_id, COALESCE(pool, '') AS pool, workload, threads, target, AVG(qps) AS qps, AVG(tps) AS tps,
             COUNT(*) AS repetitions
      FROM results WHERE campaign_id = '$campaign' AND status = 'ok'
      GROUP BY campaign_id, COALESCE(pool, ''), workload, threads, target) m
JOIN campaigns c ON c.campaign_id = m.campaign_id
LEFT JOIN cell_stats s
  ON s.campaign_id = m.campaign_id AND s.pool = m.pool AND s.metric = 'qps' AND s.workload = m.workload
     AND s.threads = m.threads AND s.target = m.target
ORDER BY m.pool, m.workload, m.threads, m.target
"""
#: Every run of the campaign with its stalls and overrun (migration 7), marked runs first.
QUALITY_SQL = """
SELECT run_id, target, workload, threads, repetition, quality_flags, stalled_s, longest_stall_s,
       ROUND(overrun_s, 1) AS overrun_s, ROUND(max_ms) AS max_ms, ROUND(qps) AS qps
FROM results WHERE campaign_id = '$campaign' AND status = 'ok'
ORDER BY quality_flags > '' DESC, stalled_s DESC, overrun_s DESC, workload, target, threads, repetition
LIMIT 500
"""
#: Every stored statistic of every cell (view cell_stats_v: the collector fills cell_stats).
CELL_STATS_SQL = f"""
SELECT NULLIF(pool, '') AS pool, metric, workload, threads, target, n, failed, mean, stdev, cv, ci_low, ci_high,
       ratio, ratio_low, ratio_high, p_value, {_VERDICT}, q_value AS q, interval_low, interval_high, interval_level,
       mark, collapsed, stalled_runs, excluded_runs
FROM cell_stats_v s WHERE campaign_id = '$campaign'
ORDER BY pool, metric, workload, threads, target
"""
CAMPAIGNS_SQL = """
SELECT c.name, c.campaign_id, c.state, c.baseline, c.total_runs,
       (SELECT COUNT(*) FROM results r WHERE r.campaign_id = c.campaign_id) AS results,
       FROM_UNIXTIME(c.created_at) AS created
FROM campaigns c ORDER BY c.created_at DESC LIMIT 50
"""
CAMPAIGN_VAR_SQL = "SELECT campaign_id FROM campaigns ORDER BY created_at DESC LIMIT 200"


def results() -> dict[str, Any]:
    """The comparison table from the results DB (MySQL datasource)."""
    lay = _Layout()
    panels = [
        lay.place(table("Comparison: mean q/s and ratio to the baseline", [_sql(RESULTS_SQL)], MYSQL,
                        "One row per cell and target: mean q/s over every successful run; ratio_to_baseline, "
                        "verdict, q and the adjusted interval are the report's (`collector report`), which leaves "
                        "stalled and short runs out (excluded_runs). Verdicts are judged over the campaign's cells "
                        "together: 'not judged yet' until its last run ends (or `collector stats`). A campaign on "
                        "several pools has a row per pool, judged as `collector report --pool` judges it."), 24, 14),
        lay.place(table("Runs: stalls and overrun", [_sql(QUALITY_SQL)], MYSQL,
                        "Runs with seconds without a completed transaction (stalled_s) or wall time past "
                        "warm-up + duration (overrun_s) first; quality_flags is what reports mark with ~."), 24, 10),
        lay.place(table("Cell statistics: every metric, with the verdict against the baseline",
                        [_sql(CELL_STATS_SQL)], MYSQL,
                        "From cell_stats, which the collector fills as results arrive, as `collector report --metric` "
                        "judges each metric: ratio_low/high and p_value are the cell's own paired log-ratio test; "
                        "verdict (faster, slower, equivalent, undecided, differs, identical, missing), q (BH) and "
                        "interval_low/high (adjusted, at interval_level) judge every compared cell of the metric "
                        "together, once the campaign's last run ended; marks + - = ° ≠ ? ! ~ < as in the report."),
                  24, 12),
        lay.place(table("Campaigns", [_sql(CAMPAIGNS_SQL)], MYSQL), 24, 8),
    ]
    variables = [_query_var("campaign", CAMPAIGN_VAR_SQL, MYSQL, multi=False)]
    return _dashboard("benchfleet-results", "Benchfleet: results", panels, variables,
                      refresh="", time_from="now-7d", description="Stored results of a campaign.")


#: A spec's campaigns over time: each cell's mean q/s per campaign (of its successful, unflagged runs, as
#: `collector history SPEC --changes` reads them), one series per cell.
HISTORY_QPS_SQL = """
SELECT c.created_at AS time, CONCAT(r.target, ' ', r.workload, ' t=', r.threads) AS metric, AVG(r.qps) AS value
FROM results r JOIN campaigns c ON c.campaign_id = r.campaign_id
WHERE c.name = '$spec' AND r.status = 'ok' AND COALESCE(r.quality_flags, '') = '' AND r.qps > 0
GROUP BY c.campaign_id, c.created_at, r.target, r.workload, r.threads
ORDER BY time, metric
"""
#: The change points the collector stored (migration 25), at the first campaign after each.
CHANGE_POINTS_SQL = """
SELECT c.created_at * 1000 AS time,
       CONCAT(p.direction, ': ', p.target, ' ', p.workload, ' t=', p.threads, ' ', p.metric, ' x', ROUND(p.ratio, 3),
              ' from campaign ', p.campaign_id, ' (q=', ROUND(p.q_value, 4), ')') AS text,
       CONCAT('change,', p.direction, ',', p.metric) AS tags
FROM change_points p JOIN campaigns c ON c.campaign_id = p.campaign_id
WHERE p.spec_name = '$spec' ORDER BY time
"""
#: Failed gates (`--fail-on-slower`), at the campaign judged.
GATE_FAILURES_SQL = """
SELECT c.created_at * 1000 AS time,
       CONCAT('gate failed: ', g.campaign_id, ' against ', COALESCE(g.against_campaign, 'its baseline'), ', ',
              g.slower_cells, ' cell(s) slower by more than ', ROUND(g.beyond * 100, 1), '%') AS text,
       'gate,failed' AS tags
FROM gate_verdicts g JOIN campaigns c ON c.campaign_id = g.campaign_id
WHERE c.name = '$spec' AND g.verdict = 'failed' ORDER BY time
"""
#: Every verdict the gate recorded on the spec's campaigns, newest first.
GATE_VERDICTS_SQL = """
SELECT FROM_UNIXTIME(g.judged_at) AS judged, g.campaign_id, g.against_campaign, g.verdict,
       ROUND(g.beyond * 100, 1) AS beyond_pct, g.slower_cells, g.judged_by
FROM gate_verdicts g JOIN campaigns c ON c.campaign_id = g.campaign_id
WHERE c.name = '$spec' ORDER BY g.judged_at DESC LIMIT 200
"""
HISTORY_CHANGES_TABLE_SQL = """
SELECT p.campaign_id, p.target, p.workload, p.threads, p.metric, p.direction, ROUND(p.ratio, 3) AS ratio,
       p.p_value, p.q_value, FROM_UNIXTIME(p.found_at) AS found, p.found_by
FROM change_points p JOIN campaigns c ON c.campaign_id = p.campaign_id
WHERE p.spec_name = '$spec' ORDER BY c.created_at DESC, p.metric, p.target, p.workload, p.threads
"""
SPEC_VAR_SQL = "SELECT name FROM campaigns GROUP BY name ORDER BY MAX(created_at) DESC LIMIT 200"


def history() -> dict[str, Any]:
    """A spec's nightly history from the results DB: each cell's q/s per campaign, with the change
    points and failed gates as annotations, and both listed."""
    lay = _Layout()
    qps = timeseries("Queries per second per campaign ($spec)", [_sql(HISTORY_QPS_SQL, fmt="time_series")], "reqps",
                     "Each cell's mean q/s over a campaign's successful, unflagged runs, at the campaign's "
                     "submission. Change points (blue) and failed gates (red) are the board's annotations.")
    qps["datasource"] = MYSQL
    # Campaigns are a night apart: points, not a line through the gaps alone.
    qps["fieldConfig"]["defaults"]["custom"].update({"showPoints": "always", "pointSize": 6, "spanNulls": True})
    panels = [
        lay.place(qps, 24, 12),
        lay.place(table("Change points", [_sql(HISTORY_CHANGES_TABLE_SQL)], MYSQL,
                        "As the collector found them when a campaign of the spec ended (`collector history SPEC "
                        "--changes` searches again): the first campaign after each shift, its size (after/before) "
                        "and significance (p, and q over every series searched)."), 24, 8),
        lay.place(table("Gate verdicts", [_sql(GATE_VERDICTS_SQL)], MYSQL,
                        "Each `--fail-on-slower` verdict on a campaign of the spec: against the last good campaign "
                        "(`collector history --changes`), the confirming campaign (`scheduler gate --confirm`), or "
                        "its own baseline (empty)."), 24, 8),
    ]
    variables = [_query_var("spec", SPEC_VAR_SQL, MYSQL, multi=False)]
    notes = (_sql_annotation("Change points", CHANGE_POINTS_SQL, "rgba(31, 96, 196, 1)"),
             _sql_annotation("Gate failures", GATE_FAILURES_SQL, "rgba(242, 73, 92, 1)"))
    return _dashboard("benchfleet-history", "Benchfleet: history", panels, variables, refresh="",
                      time_from="now-90d", description="Every campaign of a spec: throughput, change points, gates.",
                      extra_annotations=notes)


def all_dashboards() -> dict[str, dict[str, Any]]:
    """File name -> dashboard."""
    return {"campaign-live.json": campaign_live(), "throughput-vs-threads.json": throughput_vs_threads(),
            "results.json": results(), "history.json": history()}


def iter_panels(board: dict[str, Any]) -> Iterator[Panel]:
    for p in board.get("panels", []):
        yield p
        yield from p.get("panels", [])


def prometheus_queries(board: dict[str, Any]) -> list[tuple[str, str]]:
    """(where, PromQL) for every Prometheus query of a board: variables first, then panels."""
    out = []
    for v in board["templating"]["list"]:
        if v.get("datasource") == PROMETHEUS:
            m = re.fullmatch(r"label_values\((.+),\s*\w+\)", v["query"])
            # label_values() is Grafana's, not PromQL; its selector is what must match series.
            out.append((f"variable {v['name']}", m.group(1) if m else v["query"]))
    for p in iter_panels(board):
        for t in p.get("targets", []):
            if t.get("datasource", p.get("datasource")) == PROMETHEUS:
                out.append((f"panel {p['title']!r} {t['refId']}", t["expr"]))
    return out


def write_dashboards(out_dir: str | Path) -> list[Path]:
    """Write every board as ``<out_dir>/<name>.json`` (stable formatting, so diffs stay small)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, board in all_dashboards().items():
        path = out / name
        path.write_text(json.dumps(board, indent=2, sort_keys=True) + "\n")
        paths.append(path)
    return paths
