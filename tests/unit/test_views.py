"""The results DB's views follow their tables: a view's fingerprint changes with a new column,
and a user who may not replace a view leaves it, logged, instead of failing to start."""

from __future__ import annotations

from structlog.testing import capture_logs

from services.common.errors import StoreError
from services.common.store.views import definitions, refresh_views

COLUMNS = {"campaigns": ["campaign_id", "name", "created_at"], "runs": ["run_id"],
           "results": ["run_id", "qps", "result_json", "result_z", "build"], "result_series": ["run_id"],
           "cell_stats": ["campaign_id"]}


def test_results_v_lists_every_results_column_but_the_stored_result_and_a_new_column_changes_it():
    sql, fingerprint = definitions(COLUMNS)["results_v"]
    assert sql.startswith("SELECT r.`run_id`, r.`qps`, r.`build`, FROM_UNIXTIME(r.started_at)")
    more = {**COLUMNS, "results": COLUMNS["results"] + ["malloc"]}
    assert definitions(more)["results_v"][1] != fingerprint
    assert definitions(more)["campaigns_v"] == definitions(COLUMNS)["campaigns_v"]


class _Connection:
    """Answers the view queries; CREATE OR REPLACE is denied as for the collector's user (no DROP),
    which MariaDB refuses even for a view that does not exist yet."""

    def __init__(self, existing: tuple[str, ...] = ("results_v",)) -> None:
        self.executed: list[str] = []
        self.existing = existing

    def rows(self, sql: str, params=()):
        if "information_schema.COLUMNS" in sql:
            return [(t, c) for t, cols in COLUMNS.items() for c in cols]
        if "information_schema.VIEWS" in sql:
            return [(name, "INVOKER") for name in self.existing]
        return []

    def execute(self, sql: str, params=()):
        if sql.startswith("CREATE OR REPLACE SQL SECURITY INVOKER VIEW"):
            view = sql.split()[7]
            raise StoreError("results DB: 1142 DROP command denied to user 'benchfleet_collector'@'localhost' "
                             f"for table `benchfleet`.`{view}`")
        self.executed.append(sql.split(" AS ")[0])


def test_a_view_this_user_may_not_replace_is_left_and_logged():
    db = _Connection()
    with capture_logs() as logged:
        made = refresh_views(db)  # type: ignore[arg-type]
    assert "results_v" not in made and {"campaigns_v", "runs_v", "series_v", "cell_stats_v"} <= set(made)
    assert [e["view"] for e in logged if e["event"] == "view_out_of_date"] == ["results_v"]


def test_a_user_without_drop_makes_every_missing_view():
    """A results DB with no views: a user who may create views but not drop them (the collector)
    makes them all, since a missing view is made without OR REPLACE."""
    db = _Connection(existing=())
    with capture_logs() as logged:
        made = refresh_views(db)  # type: ignore[arg-type]
    assert set(made) == {"campaigns_v", "runs_v", "results_v", "series_v", "cell_stats_v"}
    assert not [e for e in logged if e["event"] == "view_out_of_date"]
