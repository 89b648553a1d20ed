"""Generated Grafana dashboards: valid against Grafana's JSON schemas, consistent, and committed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from services.collector import dashboards

jsonschema = pytest.importorskip("jsonschema")

ROOT = Path(__file__).resolve().parents[2]
#: Grafana's schemas, vendored with their licence (see tests/schemas/grafana/README.md).
SCHEMAS = ROOT / "tests" / "schemas" / "grafana"
BOARDS = dashboards.all_dashboards()


def _validator(name: str, definition: str | None = None):
    path = SCHEMAS / f"{name}.jsonschema.json"
    if not path.exists():
        pytest.fail(f"Grafana JSON schemas missing at {SCHEMAS}", pytrace=False)
    schema = json.loads(path.read_text())
    if definition is not None:
        schema = {**schema, "$ref": f"#/definitions/{definition}"}
    return jsonschema.Draft7Validator(schema)


def _errors(validator, instance) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message[:200]}" for e in validator.iter_errors(instance)]


@pytest.mark.parametrize("name", sorted(BOARDS))
def test_dashboard_matches_grafana_schema(name):
    """Each dashboard has the modern shape Grafana's schema demands (gridPos, datasource objects, schemaVersion)."""
    assert _errors(_validator("dashboard"), BOARDS[name]) == []


@pytest.mark.parametrize("name", sorted(BOARDS))
def test_panels_match_their_plugin_schemas(name):
    """Panel options, custom field config and Prometheus queries validate against their plugin's schema."""
    errors = []
    for panel in dashboards.iter_panels(BOARDS[name]):
        kind = panel["type"]
        if "options" in panel:
            errors += [f"{panel['title']} options {e}" for e in _errors(_validator(kind, "Options"), panel["options"])]
        custom = panel.get("fieldConfig", {}).get("defaults", {}).get("custom")
        if custom is not None:
            errors += [f"{panel['title']} custom {e}" for e in _errors(_validator(kind, "FieldConfig"), custom)]
        for target in panel.get("targets", []):
            if target["datasource"] == dashboards.PROMETHEUS:
                errors += [f"{panel['title']} target {e}" for e in _errors(_validator("prometheus"), target)]
    assert errors == []


def test_only_current_panel_types_are_used():
    """No deprecated `graph` panels or legacy `rows`: boards open in Grafana 11 without migration."""
    for board in BOARDS.values():
        assert "rows" not in board
        assert {p["type"] for p in dashboards.iter_panels(board)} <= {"timeseries", "stat", "table", "barchart"}


@pytest.mark.parametrize("name", sorted(BOARDS))
def test_panel_ids_unique_and_grid_does_not_overlap(name):
    """Panels neither share an id nor sit on top of each other."""
    panels = list(dashboards.iter_panels(BOARDS[name]))
    assert len({p["id"] for p in panels}) == len(panels)
    cells = set()
    for p in panels:
        g = p["gridPos"]
        assert g["x"] + g["w"] <= 24
        area = {(x, y) for x in range(g["x"], g["x"] + g["w"]) for y in range(g["y"], g["y"] + g["h"])}
        assert not cells & area, p["title"]
        cells |= area


def test_variables_used_by_queries_are_defined():
    """Every $variable a query uses is a template variable of the board (or a Grafana built-in)."""
    import re

    for board in BOARDS.values():
        defined = {v["name"] for v in board["templating"]["list"]}
        for p in dashboards.iter_panels(board):
            for t in p["targets"]:
                text = t.get("expr") or t.get("rawSql")
                # $1: label_replace's capture group, which Grafana leaves alone (no variable has that name).
                used = set(re.findall(r"\$(\w+)", text)) - {"__rate_interval", "__interval", "__range", "1"}
                assert used <= defined, (board["title"], p["title"], used - defined)


def test_boards_cover_what_users_watch():
    """The live board shows q/s, tps, latency, errors, threads and progress; threads board one series per target."""
    live = json.dumps(BOARDS["campaign-live.json"])
    for metric in ("queries_per_second", "transactions_per_second", "latency_seconds_bucket", "errors_total",
                   "run_threads", "run_progress_ratio", "stalled_seconds_total", "ALERTS"):
        assert metric in live
    threads = BOARDS["throughput-vs-threads.json"]
    pivots = [t for p in threads["panels"] for t in p.get("transformations", []) if t["id"] == "groupingToMatrix"]
    # One column per target, or per target and pool (TARGET@POOL) in a campaign on several pools.
    assert pivots and all(t["options"]["columnField"] == "series" for t in pivots)
    assert "ratio_to_baseline" in json.dumps(BOARDS["results.json"])


def test_results_board_reads_the_results_db_through_mysql():
    """The comparison table queries the results DB through the MySQL datasource, not Prometheus."""
    board = BOARDS["results.json"]
    for p in dashboards.iter_panels(board):
        assert p["datasource"] == dashboards.MYSQL
        assert all("FROM" in t["rawSql"] for t in p["targets"])


def test_committed_dashboards_are_up_to_date(tmp_path):
    """dashboards/*.json in the repo are exactly what the generator writes now."""
    dashboards.write_dashboards(tmp_path)
    for path in sorted(tmp_path.iterdir()):
        committed = ROOT / "dashboards" / path.name
        assert committed.exists(), f"run write_dashboards: {committed} missing"
        assert committed.read_text() == path.read_text(), f"{committed} is stale; regenerate it"


def test_prometheus_queries_include_variables_and_panels():
    """Queries handed to the live check include label_values selectors, unwrapped to plain PromQL."""
    queries = dashboards.prometheus_queries(BOARDS["campaign-live.json"])
    assert ("variable campaign", "benchfleet_worker_queries_total") in queries
    assert not any("label_values" in q for _, q in queries)
    assert dashboards.prometheus_queries(BOARDS["results.json"]) == []


def _datasource_refs(node) -> list[dict]:
    """Every datasource reference anywhere in a board (panels, targets, variables, annotations)."""
    if isinstance(node, dict):
        found = [node["datasource"]] if isinstance(node.get("datasource"), dict) else []
        return found + [r for v in node.values() for r in _datasource_refs(v)]
    if isinstance(node, list):
        return [r for v in node for r in _datasource_refs(v)]
    return []


@pytest.mark.parametrize("name", sorted(BOARDS))
def test_boards_name_no_datasource_uid_and_define_their_datasource_variables(name):
    """Importable into any Grafana: every datasource is a ${variable} of type datasource defined on
    the board (only Grafana's own annotation source is named), never a fixed uid."""
    board = BOARDS[name]
    sources = {v["name"]: v["query"] for v in board["templating"]["list"] if v["type"] == "datasource"}
    for ref in _datasource_refs(board):
        if ref["type"] == "grafana":
            continue
        assert ref["uid"].startswith("${") and ref["uid"][2:-1] in sources, ref
        assert sources[ref["uid"][2:-1]] == ref["type"]
    kinds = [v["type"] for v in board["templating"]["list"]]
    assert kinds == sorted(kinds, key=lambda k: k != "datasource"), "datasource variables come first"


def test_live_board_annotates_runs_from_the_results_db():
    """Each run's start and end (a region) from the results DB, for the board's campaign."""
    [runs] = [a for a in BOARDS["campaign-live.json"]["annotations"]["list"] if a["name"] == "Runs"]
    assert runs["datasource"] == dashboards.MYSQL and runs["enable"]
    sql = runs["target"]["rawSql"]
    assert "AS time" in sql and "AS timeend" in sql and "'$campaign'" in sql


def test_history_board_plots_each_cell_per_campaign_and_marks_changes_and_failed_gates():
    """The history board reads only the results DB: q/s per campaign as one time series per cell of the
    chosen spec, and the stored change points and failed gates of that spec as annotations."""
    board = BOARDS["history.json"]
    [qps] = [p for p in dashboards.iter_panels(board) if p["type"] == "timeseries"]
    [target] = qps["targets"]
    assert qps["datasource"] == target["datasource"] == dashboards.MYSQL and target["format"] == "time_series"
    assert "AS time" in target["rawSql"] and "AS metric" in target["rawSql"] and "'$spec'" in target["rawSql"]
    assert all(p["datasource"] == dashboards.MYSQL for p in dashboards.iter_panels(board))
    notes = {a["name"]: a for a in board["annotations"]["list"] if a.get("datasource") == dashboards.MYSQL}
    assert set(notes) == {"Change points", "Gate failures"}
    assert "FROM change_points" in notes["Change points"]["target"]["rawSql"]
    assert "g.verdict = 'failed'" in notes["Gate failures"]["target"]["rawSql"]
    assert all(n["enable"] and "'$spec'" in n["target"]["rawSql"] for n in notes.values())
    [spec] = [v for v in board["templating"]["list"] if v["name"] == "spec"]
    assert spec["datasource"] == dashboards.MYSQL and not spec["multi"]
