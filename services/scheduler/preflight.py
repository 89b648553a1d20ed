"""What the scheduler refuses before anything is recorded or published, beyond the spec model
itself: checks that need the settings or the host. `validate`, `plan` and `submit` run the same
ones, so a spec that validates is one that is accepted."""

from __future__ import annotations

import time
from typing import Callable

from services.common.config import Settings, with_db_password
from services.common.spec.durations import format_duration
from services.common.errors import FieldError, SettingsError, SpecError, StoreError
from services.common.messages.announcements import WorkerBuilds
from services.common.spec.campaign import CampaignSpec
from services.common.spec.targets import ManagedTarget
from services.common.spec.loading import SpecSource
from services.scheduler import build_check, plan, server_check

#: Reads the last build announcement of each host of a pool (the results DB by default).
Announcements = Callable[[Settings, str], list[WorkerBuilds]]


def stored_announcements(settings: Settings, pool: str) -> list[WorkerBuilds]:
    """The pool's announcements as the collector stored them; StoreError when unreadable (a user
    who may not read the DB password gets the check left to the workers, not a refusal)."""
    from services.common.store import Store

    try:
        settings = with_db_password(settings)
    except SettingsError as e:
        raise StoreError(str(e)) from None
    store = Store(settings).open(migrate=False)
    try:
        return store.workers.pool_builds(pool)
    finally:
        store.close()


#: Rows a prepare is allowed per second in a run's length: about a seventh of what bench/prepare
#: measured on a quiet host (4 x 100k rows in 1.16 s, docs/drivers.md), for busy hosts and wider engines.
PREPARE_ROWS_PER_S = 50_000
#: Seconds kept between the longest run and the broker's consumer_timeout (publishing the
#: result, a reconnect).
CONSUMER_TIMEOUT_MARGIN_S = 60


def run_parts(spec: CampaignSpec) -> list[tuple[str, float]]:
    """What the longest run's delivery stays unacked for, part by part: stopping the previous
    target's server and starting this one's, preparing the tables, waiting for the target to
    settle, then warm-up, measurement and the fixed overhead (each the most any target allows)."""
    managed = [t for t in spec.targets if isinstance(t, ManagedTarget)]
    rows = max(shape.tables * shape.table_size for shape in (w.data_for(spec.data) for w in spec.workloads))
    return [
        ("stop", max((t.stop_timeout for t in managed), default=0.0)),
        ("start", max((t.start_timeout for t in managed), default=0.0)),
        ("prepare", rows / PREPARE_ROWS_PER_S),
        ("quiesce", max((t.quiesce.timeout for t in spec.targets if t.quiesce.enabled), default=0.0)),
        *_longest_window(spec),
        ("overhead", plan.RUN_OVERHEAD_S),
    ]


def _longest_run(spec: CampaignSpec) -> tuple[int, int]:
    """The workload (its index) and thread count of the spec's longest warm-up and window."""
    def length(cell: tuple[int, int]) -> float:
        key = spec.workloads[cell[0]].key
        return spec.warmup_for(cell[1], key) + spec.duration_for(cell[1], key)
    return max(((i, t) for i in range(len(spec.workloads)) for t in spec.threads), key=length)


def _longest_window(spec: CampaignSpec) -> list[tuple[str, float]]:
    """The warm-up and measured time of the spec's longest run."""
    index, threads = _longest_run(spec)
    key = spec.workloads[index].key
    return [("warmup", spec.warmup_for(threads, key)), ("duration", spec.duration_for(threads, key))]


def _longest_window_field(spec: CampaignSpec) -> tuple[str | int, ...]:
    """The field that gives the longest run its window: a workload's own ``duration_by_threads``
    (which wins from its lowest count on), the campaign's, or ``duration``."""
    index, threads = _longest_run(spec)
    if any(k <= threads for k in spec.workloads[index].duration_by_threads or {}):
        return ("workloads", index, "duration_by_threads")
    return ("duration_by_threads",) if any(k <= threads for k in spec.duration_by_threads) else ("duration",)


def run_length_errors(spec: CampaignSpec, settings: Settings, source: SpecSource) -> list[FieldError]:
    """A run's delivery, from server stop and start to its last measured second, may not outlast
    max_run_s nor the broker's consumer_timeout: the broker closes a consumer whose delivery stays
    unacked past it, and the run would be delivered again, and again."""
    parts = run_parts(spec)
    run_s = sum(s for _, s in parts)
    consumer_s = settings.consumer_timeout_ms / 1000 - CONSUMER_TIMEOUT_MARGIN_S
    if run_s <= min(settings.max_run_s, consumer_s):
        return []
    field = _longest_window_field(spec)
    shown = " + ".join(f"{name} {format_duration(round(s))}" for name, s in parts if s >= 0.5)
    if consumer_s < settings.max_run_s:
        limit = (f"the broker's consumer_timeout {format_duration(round(settings.consumer_timeout_ms / 1000))} "
                 f"less {CONSUMER_TIMEOUT_MARGIN_S} s (BENCHFLEET_CONSUMER_TIMEOUT_MS, as deploy/ensure-services "
                 "sets it)")
    else:
        limit = (f"the longest allowed run {format_duration(settings.max_run_s)} (BENCHFLEET_MAX_RUN_S; keep it "
                 "below RabbitMQ's consumer_timeout)")
    return [source.error(field, f"a run may take {format_duration(round(run_s))} ({shown}), more than {limit}")]


def results_db_errors(spec: CampaignSpec, settings: Settings, source: SpecSource) -> list[FieldError]:
    """No target may use the results DB's own database: prepare drops and creates tables there."""
    return [source.error(("targets", i, "database"),
                         f"{t.database} is the results DB's database (BENCHFLEET_DB_NAME); benchmark tables "
                         "would be created and dropped in it")
            for i, t in enumerate(spec.targets) if t.database.lower() == settings.db_name.lower()]


def build_errors(spec: CampaignSpec, settings: Settings, source: SpecSource,
                 announcements: Announcements) -> tuple[list[FieldError], list[str]]:
    """Errors for builds no worker of the pool (of each of ``pools``) announced (only read when a target names one)."""
    if not any(isinstance(t, ManagedTarget) and t.build is not None for t in spec.targets):
        return [], []
    errors: list[FieldError] = []
    notes: list[str] = []
    # A campaign on several pools needs the build on every pool: each measures every cell.
    for pool in spec.pool_names:
        try:
            announced = announcements(settings, pool)
        except StoreError as e:
            return errors, notes + [f"builds not checked here ({e}); a worker without the build refuses its runs"]
        missing, said = build_check.check_builds(spec, source, announced, now=time.time(),
                                                 ttl_s=settings.announce_ttl_s, pool=pool)
        errors, notes = errors + missing, notes + said
    return errors, notes


def check(spec: CampaignSpec, settings: Settings, source: SpecSource,
          announcements: Announcements = stored_announcements) -> list[str]:
    """Raise SpecError naming every problem; return notes (checks left to the workers)."""
    errors = run_length_errors(spec, settings, source) + results_db_errors(spec, settings, source)
    option_errors, notes = server_check.check_managed(spec, source)
    errors += option_errors
    more_errors, more_notes = build_errors(spec, settings, source, announcements)
    errors += more_errors
    notes += more_notes
    if errors:
        raise SpecError(source.name, errors)
    return notes
