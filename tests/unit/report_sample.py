"""A small synthetic campaign for report tests: three targets, two workloads, four thread
counts, three repetitions, with status deltas, server figures, one failed run, one stalled run,
a collapse and a server count that disagrees, so every section of the HTML report has something to show."""

from __future__ import annotations

from bench.synthetic import synthetic_results, synthetic_spec
from services.common.messages.results import RunQuality, RunResult, ServerCount
from services.common.results.rows import ResultRow
from services.reporting.analysis import CampaignData

CAMPAIGN_ID = "c-sample"
TARGETS = ["off", "8", "32"]
WORKLOADS = ["oltp_point_select", "oltp_read_only"]
THREADS = [1, 4, 64, 256]
REPEAT = 4


def sample_results() -> list[RunResult]:
    """The campaign's results: one failed, one flagged for a stall, the rest clean (assessed); the
    server's count agrees on all but one run (10% short) and one (n/a, with why)."""
    spec = synthetic_spec("sample", TARGETS, WORKLOADS, THREADS, REPEAT, duration=12, warmup=2)
    out = []
    for i, r in enumerate(synthetic_results(spec, CAMPAIGN_ID, seconds=12, seed=7, collapse_target="8")):
        stalled = i == 5
        quality = RunQuality(planned_s=14.0, wall_s=14.5 if not stalled else 30.0, overrun_s=0.0 if not stalled else 16.0,
                             stalled_s=3 if stalled else 0, longest_stall_s=2 if stalled else 0,
                             flags=["stall", "overrun"] if stalled else [])
        # The server's own count: within 1% of the client's, 10% short on one run, n/a on another.
        tx = r.totals.transactions
        count = (ServerCount(reason="the server runs a thread pool without an extra_port") if i == 11 else
                 ServerCount(counter=["Com_commit", "Com_rollback"], server_transactions=round(tx * (0.9 if i == 7 else 1.001))))
        r = r.model_copy(update={"quality": quality, "server": r.server.model_copy(update={"count": count})})
        if i == 9:
            r = r.model_copy(update={"status": "failed", "error": "Lost connection to server during query"})
        out.append(r)
    return out


def sample_data() -> CampaignData:
    """The campaign as the report reads it with every whole result decoded (the slow path)."""
    spec = synthetic_spec("sample", TARGETS, WORKLOADS, THREADS, REPEAT, duration=12, warmup=2)
    settings = spec.public_dump()
    settings["campaign_id"] = CAMPAIGN_ID
    return CampaignData(campaign_id=CAMPAIGN_ID, name="sample", state="finished_with_failures",
                        targets=tuple(TARGETS), baseline=TARGETS[0], workloads=tuple(spec.workloads[i].key for i in range(2)),
                        threads=tuple(THREADS), settings=settings,
                        runs=tuple(ResultRow.of(r) for r in sample_results()), created_at=1_700_000_000.0)


class FinishedRuns:
    """The store's runs part for a campaign whose 12 runs are all done (what `submit --wait` asks)."""

    def counts(self, campaign_id):
        return {"pending": 0, "running": 0, "done": 12, "failed": 0, "cancelled": 0}

    def active(self, campaign_id):
        return []

    def failed(self, campaign_id):
        return []
