"""A campaign the scheduler submits of its own accord and follows to its end (a gate's confirming
re-run, a bisect's step): forced under its own key, undone when interrupted while submitting."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Sequence

from services.common.bus.rabbitmq import RabbitBus, Role
from services.common.cli import EXIT_INTERRUPTED, error
from services.common.config import Settings
from services.common.messages.runs import RunSpec
from services.common.spec.campaign import CampaignSpec
from services.common.store import Store
from services.common.store.campaigns import Duplicate
from services.common.terminal import escape_controls
from services.scheduler.deferred import deferred_sigint
from services.scheduler.follow import follow, stopped_waiting
from services.scheduler.submit import RolledBack, StoreLedger, submit


def say(line: str) -> None:
    """A line of the scheduler's own progress on stderr, control characters shown escaped."""
    print(escape_controls(line), file=sys.stderr)


@dataclass(frozen=True)
class FollowUp:
    """One follow-up campaign and what the user reads about it: its submit being undone, it not
    running at all, and it starting."""

    spec: CampaignSpec
    campaign_id: str
    runs: Sequence[RunSpec]
    key: str
    #: The broker connection's name (seen in RabbitMQ's management view).
    connection: str
    undoing: str
    not_run: str
    started: str


def submit_and_follow(settings: Settings, f: FollowUp, poll: float) -> int | None:
    """Submit ``f`` and follow it to its end: None once it ended, else the exit code (it never ran, or
    the wait was stopped by Ctrl-C)."""
    with Store(settings) as store, RabbitBus(settings, name=f.connection, role=Role.SCHEDULER) as bus:
        with deferred_sigint(f.undoing) as interrupted:
            # Forced (no key recorded): each follow-up is a fresh look, even one repeating an earlier.
            outcome = submit(StoreLedger(store, publisher=bus.user), bus, f.spec, f.campaign_id, list(f.runs),
                             key=f.key, explicit_key=False, force=True, interrupted=interrupted)
    if isinstance(outcome, (RolledBack, Duplicate)):
        error(f.not_run)
        return EXIT_INTERRUPTED
    say(f.started)
    try:
        follow(settings, f.campaign_id, f.spec, len(f.runs), poll)
    except KeyboardInterrupt:
        return stopped_waiting(f.campaign_id)
    return None
