"""The results DB's side of moving a campaign between results DBs: everything stored of one
campaign exported, and an export imported again under the same ids."""

from __future__ import annotations

from typing import Sequence

from services.common.errors import CampaignExists
from services.common.store.campaign_file import CampaignExport, ExportedCampaign, ExportedRun
from services.common.store.campaigns import Campaigns
from services.common.store.connection import StoreConnection
from services.common.store.results import Results


class Transfer:
    """Export and import of whole campaigns (``Store.transfer``)."""

    def __init__(self, db: StoreConnection, campaigns: Campaigns, results: Results):
        self.db = db
        self.campaigns = campaigns
        self.results = results

    def export_campaign(self, ref: str) -> CampaignExport | None:
        """Everything stored of campaign ``ref`` (id, or name for the latest); None if unknown."""
        c = self.campaigns.get(ref)
        if c is None:
            return None
        (spec_hash_, pool, key), = self.db.rows(
            "SELECT spec_hash, pool, idempotency_key FROM campaigns WHERE campaign_id=%s", (c.campaign_id,))
        runs = [ExportedRun(run_id=r[0], seq=int(r[1]), target=r[2], workload=r[3], threads=int(r[4]),
                            repetition=int(r[5]), state=r[6], attempts=int(r[7]), worker=r[8], started_at=r[9],
                            ended_at=r[10], error=r[11], updated_at=float(r[12]))
                for r in self.db.rows("SELECT run_id, seq, target, workload, threads, repetition, state, attempts, worker,"
                                      " started_at, ended_at, error, updated_at FROM runs WHERE campaign_id=%s"
                                      " ORDER BY seq, run_id", (c.campaign_id,))]
        results = sorted(self.results.whole(c.campaign_id), key=lambda r: r.run_id)
        return CampaignExport(
            campaign=ExportedCampaign(campaign_id=c.campaign_id, name=c.name, spec=c.spec, spec_hash=spec_hash_,
                                      pool=pool, baseline=c.baseline, total_runs=c.total_runs, state=c.state,
                                      created_at=c.created_at, idempotency_key=key),
            runs=runs, results=results)

    def import_campaign(self, export: CampaignExport, *, replace: bool = False) -> None:
        """Bring an exported campaign in: the same campaign id, run ids and results. A campaign of
        that id already stored is refused (CampaignExists) unless ``replace``: then the file's
        campaign row, runs and results replace the stored ones of the same ids."""
        self.db.retried(lambda: self._import_once(export, replace))

    def _import_once(self, export: CampaignExport, replace: bool) -> None:
        c = export.campaign
        # One transaction: a failure part-way (a result the DB refuses, the DB going away) leaves no
        # campaign half imported, and a reader never sees its runs without their results. The check
        # locks the id (a gap lock when absent), so two imports of one new id cannot both pass it.
        with self.db.atomic(f"import campaign {c.campaign_id}"):
            if not replace and self.db.rows("SELECT 1 FROM campaigns WHERE campaign_id=%s FOR UPDATE", (c.campaign_id,)):
                raise CampaignExists(f"campaign {c.campaign_id} is already in the results DB; importing would replace "
                                     "its spec, runs and results: give --replace to do so")
            self.db.execute(
                "INSERT INTO campaigns (campaign_id, name, spec_json, spec_hash, pool, baseline, total_runs, state,"
                " created_at, idempotency_key) VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s) ON DUPLICATE KEY UPDATE"
                " name=VALUES(name), spec_json=VALUES(spec_json), spec_hash=VALUES(spec_hash), pool=VALUES(pool),"
                " baseline=VALUES(baseline), total_runs=VALUES(total_runs), state=VALUES(state),"
                " created_at=VALUES(created_at), idempotency_key=VALUES(idempotency_key)",
                (c.campaign_id, c.name, c.spec.model_dump_json(), c.spec_hash, c.pool, c.baseline, c.total_runs, c.state,
                 c.created_at, c.idempotency_key))
            # The runs first: a result is stored only for a planned run. Storing it sets its run's
            # state, so the export's rows are written again after, their word being final.
            self._upsert_runs(c.campaign_id, export.runs)
            for result in export.results:
                self.results.store(result, replace_ok=replace)
            self._upsert_runs(c.campaign_id, export.runs)
            self.campaigns.set_state(c.campaign_id, c.state)

    def _upsert_runs(self, campaign_id: str, runs: Sequence[ExportedRun]) -> None:
        if not runs:
            return
        self.db.execute(
            "INSERT INTO runs (run_id, campaign_id, seq, target, workload, threads, repetition, state, attempts,"
            " worker, started_at, ended_at, error, updated_at) VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s)"
            " ON DUPLICATE KEY UPDATE campaign_id=VALUES(campaign_id), seq=VALUES(seq), target=VALUES(target),"
            " workload=VALUES(workload), threads=VALUES(threads), repetition=VALUES(repetition),"
            " state=VALUES(state), attempts=VALUES(attempts), worker=VALUES(worker),"
            " started_at=VALUES(started_at), ended_at=VALUES(ended_at), error=VALUES(error),"
            " updated_at=VALUES(updated_at)",
            many=[(r.run_id, campaign_id, r.seq, r.target, r.workload, r.threads, r.repetition, r.state,
                   r.attempts, r.worker, r.started_at, r.ended_at, r.error, r.updated_at) for r in runs])
