"""The results DB's views follow their tables: a view's fingerprint changes with a new column,
and a user who may not replace a view leaves it, logged, instead of failing to start."""

from __future__ import annotations

from structlog.testing import capture_logs

from services.common.errors import StoreError
from services.common.views import definitions, refresh_views

COLUMNS = {"campaigns": ["campaign_id", "name", "created_at"], "runs": ["run_id"],
           "results": ["run_id", "qps", "result_json", "result_z", "build"], "result_series": ["run_id"],
           "cell_stats": ["campaign_id"]}


def test_results_v_lists_every_results_column_but_the_stored_result_and_a_new_column_changes_it():
    sql, fingerprint = definitions(COLUMNS)["results_v"]
    assert sql.startswith("SELECT r.`run_id`, r.`qps`, r.`build`, FROM_UNIXTIME(r.started_at)")
    more = {**COLUMNS, "results": COLUMNS["results"] + ["malloc"]}
    assert definitions(more)["results_v"][1] != fingerprint
    assert definitions(more)["campaigns_v"] == definitions(COLUMNS)["campaigns_v"]


class _Store:
    """Answers the view queries; replacing views is denied as for the collector's user (no DROP)."""

    def __init__(self) -> None:
        self.executed: list[str] = []

    def _rows(self, sql: str, params=()):
        if "information_schema.COLUMNS" in sql:
            return [(t, c) for t, cols in COLUMNS.items() for c in cols]
        if "information_schema.VIEWS" in sql:
            return [("results_v",)]
        return []

    def _execute(self, sql: str, params=()):
        if sql.startswith("CREATE OR REPLACE VIEW results_v"):
            raise StoreError("results DB: 1142 DROP command denied to user 'benchfleet_collector'@'localhost' "
                             "for table `benchfleet`.`results_v`")
        self.executed.append(sql.split(" AS ")[0])


def test_a_view_this_user_may_not_replace_is_left_and_logged():
    store = _Store()
    with capture_logs() as logged:
        made = refresh_views(store)  # type: ignore[arg-type]
    assert "results_v" not in made and {"campaigns_v", "runs_v", "series_v", "cell_stats_v"} <= set(made)
    assert [e["view"] for e in logged if e["event"] == "view_out_of_date"] == ["results_v"]
