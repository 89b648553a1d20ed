"""The results DB's procedures as SQL (what deploy/ensure-services feeds MariaDB's root), and how the
store's cancel tells a submitter's own campaign, an operator's cancel and a refusal apart."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import pytest

from services.common.errors import NotYourCampaign, StoreError
from services.common.store import procedures
from services.common.store.campaigns import Campaigns

ROOT = Path(__file__).resolve().parents[2]


def test_ensure_services_reads_every_procedure_from_the_file_alone():
    """The file runs by itself (isolated: no benchfleet package on the path), printing each procedure
    for the mariadb client with the definer given, SQL SECURITY DEFINER and the version."""
    out = subprocess.run([sys.executable, "-I", str(ROOT / "services/common/store/procedures.py"), "bf_procedures"],
                         capture_output=True, text=True, check=True).stdout
    assert out.startswith("DELIMITER ;;\n") and out.endswith("DELIMITER ;\n")
    for name in procedures.NAMES:
        assert f"CREATE OR REPLACE DEFINER=bf_procedures PROCEDURE {name}(" in out
    assert out.count("SQL SECURITY DEFINER") == out.count(f"COMMENT '{procedures.VERSION}'") == len(procedures.NAMES)


def test_every_procedure_but_record_refuses_a_campaign_of_someone_else():
    """Adding runs, withdrawing and cancelling compare the campaign's submitter with the caller's login;
    recording takes the submitter from the login, never from a parameter."""
    bodies = dict(procedures.PROCEDURES)
    for name in ("bf_add_runs", "bf_withdraw_campaign", "bf_cancel_campaign"):
        assert "v_submitter <> SUBSTRING_INDEX(USER(), '@', 1)" in bodies[name], name
    assert "p_key, SUBSTRING_INDEX(USER(), '@', 1))" in bodies["bf_record_campaign"]
    assert "submitter" not in bodies["bf_record_campaign"].split("MODIFIES")[0]


def test_a_store_makes_the_procedures_only_where_there_are_none_and_never_replaces_them():
    """A fresh results DB gets every procedure (CREATE, not OR REPLACE: whoever replaced them would become
    their definer and every submitter's CALL would fail); current ones are left alone; an older or
    missing one is refused naming deploy/ensure-services, a newer one asks to update the checkout."""
    fresh = procedures.to_make({"other_proc": "x"})
    assert [n for n, _ in fresh] == list(procedures.NAMES)
    assert all(sql.startswith(f"CREATE PROCEDURE {n}(") for n, sql in fresh)
    made = {n: procedures.VERSION for n in procedures.NAMES}
    assert procedures.to_make(made) == []
    # Some current, the rest missing: a collector is making them beside this store (its first start).
    halfway = {n: procedures.VERSION for n in procedures.NAMES[:1]}
    assert [n for n, _ in procedures.to_make(halfway)] == list(procedures.NAMES[1:])
    older = dict(made, bf_cancel_campaign="benchfleet procedures 1")
    del older["bf_add_runs"]
    with pytest.raises(ValueError, match=r"^the procedures bf_add_runs, bf_cancel_campaign are not 'benchfleet "
                                         r"procedures \d+' \(found: benchfleet procedures 1, missing\): run "
                                         r"deploy/ensure-services mariadb \(as root\)"):
        procedures.to_make(older)
    with pytest.raises(ValueError, match="found: benchfleet procedures 99\\): this checkout is older"):
        procedures.to_make(dict(made, bf_add_runs="benchfleet procedures 99"))


def test_adding_runs_refuses_a_run_id_of_another_campaign():
    """Run ids are predictable: bf_add_runs checks each starts with the campaign id and the dot of
    run_id_of (compared by LEFT, so a campaign id's _ or % is no wildcard)."""
    from services.common.messages.runs import Cell, run_id_of
    assert run_id_of("c1", Cell(target="A", workload="w", threads=1), 0).startswith("c1.")
    body = dict(procedures.PROCEDURES)["bf_add_runs"]
    check = "LEFT(j.run_id, CHAR_LENGTH(p_campaign_id) + 1) <> CONCAT(p_campaign_id, '.')"
    assert check in body and body.index(check) < body.index("INSERT INTO runs")


class Db:
    """A results DB connection whose transactions fail with the given MySQL errors, one per call."""

    def __init__(self, *errnos: int | None):
        self.errnos = list(errnos)
        self.sql: list[str] = []

    def transaction(self, what: str, statements: Callable[[Any], None]) -> None:
        errno = self.errnos.pop(0)
        if errno is not None:
            raise StoreError(f"results DB: {what}: {errno} was submitted by bob: only its submitter "
                             "or an operator may cancel it", errno=errno)
        statements(self)

    def execute(self, sql: str, params: Any = ()) -> None:
        self.sql.append(sql.split(" ")[0] + " " + sql.split(" ")[1])

    def fetchall(self) -> list[tuple[int]]:
        return [(3,)]

    rowcount = 4


def test_a_cancel_refused_by_the_procedure_falls_back_to_an_operators_updates():
    """Own campaign: the procedure's count. Another's: the plain UPDATEs, which an operator may run;
    a user they are denied to gets NotYourCampaign with the procedure's reason."""
    assert Campaigns(Db(None)).cancel("c1", 1.0) == 3  # type: ignore[arg-type]
    operator = Db(1644, None)
    assert Campaigns(operator).cancel("c1", 1.0) == 4  # type: ignore[arg-type]
    assert operator.sql == ["UPDATE runs", "UPDATE campaigns"]
    with pytest.raises(NotYourCampaign, match="^campaign c1 was submitted by bob: only its submitter or an operator"):
        Campaigns(Db(1644, 1142)).cancel("c1", 1.0)  # type: ignore[arg-type]
    with pytest.raises(StoreError, match="2013"):  # anything else is not a refusal
        Campaigns(Db(2013)).cancel("c1", 1.0)  # type: ignore[arg-type]


def test_ensure_services_drops_exactly_the_fleets_own_views():
    """ensure-services drops earlier versions' DEFINER views by name, from a list of its own: the
    list must name every view the store makes, and nothing else."""
    import re as _re
    from pathlib import Path

    from services.common.store.views import VIEWS

    text = (Path(__file__).resolve().parents[2] / "deploy" / "ensure-services").read_text()
    listed = _re.search(r'^fleet_views="([^"]*)"$', text, _re.M)
    assert listed is not None
    assert listed.group(1).split() == [name for name, _ in VIEWS]
