"""Parts of runs split over load hosts as the collector takes them in: kept until their group is whole,
merged exactly and stored as the run's one result; a failed part fails the run whole; a part of a
whole run, or one taken again after its run ended, is dropped (logged)."""

from __future__ import annotations

from typing import Protocol

from services.collector.part_merge import complete, failed_run, merge_parts
from services.common import logs
from services.common.messages.results import RunResult
from services.common.store.takers import Binding, Claim, Taker, judge_result, refusal_reason

log = logs.get(__name__)


class PartRecords(Protocol):
    """Parts of runs split over load hosts (services.common.store's Parts is one)."""

    def keep(self, result: RunResult) -> list[RunResult]:
        """Keep a part of a run (spec load_hosts); every kept part of its group."""
        ...

    def merged(self, run_id: str, group: str) -> None: ...


class _Bindings(Protocol):
    def binding(self, run_id: str, part: int | None = None) -> Binding | None: ...


class _Results(Protocol):
    def get(self, run_id: str) -> RunResult | None: ...

    def store(self, result: RunResult, *, sender: Taker | None = None) -> bool: ...


class PartIntake(Protocol):
    """What taking parts in needs of the results DB (the collector's ResultStore is one)."""

    @property
    def runs(self) -> _Bindings: ...

    @property
    def results(self) -> _Results: ...

    @property
    def parts(self) -> PartRecords: ...


def part_of_a_split_run(store: PartIntake, part: RunResult, sender: Taker) -> bool:
    """Whether a part may be kept: only a run split over load hosts has parts, and only the worker
    that took a part sends it (store/takers.py); another's part, or a part of a whole run, is logged
    and dropped. A run not planned passes here and is refused by the store, naming it."""
    assert part.part is not None
    binding = store.runs.binding(part.run_id, part.part.index)
    if binding is None:
        return True
    decision = judge_result(binding, sender, ok=part.status == "ok", part=True)
    if decision is Claim.TAKER:
        return True
    log.warning("result_refused", run_id=part.run_id, campaign_id=part.campaign_id, status=part.status,
                part=part.part.index, sender=str(sender), taker=str(binding.taker) if binding.taker else None,
                reason=refusal_reason(binding, ok=part.status == "ok", part=True))
    return False

def spoils_a_merge(store: PartIntake, result: RunResult) -> bool:
    """Whether ``result`` is a failure of a part that never met its partners (no start was
    agreed: ``parts`` empty; a part taken again after its run ended) and the run already has
    its result (an ok merge, or the failure its parts gave up with): it is acked and dropped."""
    if result.status == "ok":
        return False
    stored = store.results.get(result.run_id)
    if stored is not None and ((stored.parts and stored.status == "ok") or result.parts is not None):
        log.info("part_ignored", run_id=result.run_id, status=result.status, error=result.error,
                 stored_group=stored.parts[0].group if stored.parts else None, stored_status=stored.status)
        return True
    return False

def store_part(store: PartIntake, part: RunResult) -> RunResult | None:
    """A part of a run split over load hosts: kept until its whole group has arrived, then
    merged exactly and stored as the run's one result (returned); a part that did not end ok
    fails the run whole, without a measurement. None while parts are missing, and for a part
    delivered again after its group was stored, or failed after the run was stored ok."""
    assert part.part is not None
    group = part.part.group
    stored = store.results.get(part.run_id)
    # A part never retries alone, so the first failure of a run's parts is the run's final word:
    # a later failure is a partner giving up in turn, or a part redelivered after its run ended.
    if stored is not None and ((stored.parts and stored.parts[0].group == group) or part.status != "ok"):
        log.info("part_ignored", run_id=part.run_id, part=part.part.index, group=group,
                 stored_group=stored.parts[0].group if stored.parts else None, stored_status=stored.status)
        return None
    kept = store.parts.keep(part)
    if part.status != "ok":
        # Every part of the group known so far is recorded with the failure.
        run = failed_run(part, kept)
    else:
        if not complete(kept):
            log.info("part_kept", run_id=part.run_id, part=part.part.index, group=group,
                     parts=f"{len(kept)}/{part.part.count}")
            return None
        run = merge_parts(kept)
    if not store.results.store(run):
        run = None  # an ok result of the run was stored already, and stays
    # The group is over either way: its kept parts are emptied, never merged later.
    store.parts.merged(part.run_id, group)
    return run
