"""Checking managed targets' ``build:`` against the builds the pool's workers announced.

Workers announce their registered builds on the bus at connect, when their registry changes and
every ANNOUNCE_EVERY_S; the collector keeps the last announcement per host and pool in the results
DB, and one not refreshed within announce_ttl_s counts for nothing. Pure: the caller
reads the announcements (services/scheduler/preflight.py).
"""

from __future__ import annotations

from services.common.messages.announcements import WorkerBuilds
from services.common.spec.campaign import CampaignSpec
from services.common.spec.targets import ManagedTarget
from services.common.spec.loading import FieldError, SpecSource
from services.common.spec.problems import closest, did_you_mean


def fresh(announced: list[WorkerBuilds], now: float, ttl_s: float) -> tuple[list[WorkerBuilds], list[WorkerBuilds]]:
    """The announcements refreshed within ``ttl_s`` (0: all), and the ones left out: a host that
    stopped announcing (decommissioned, its workers gone) must not vouch for a build."""
    if ttl_s <= 0:
        return list(announced), []
    return [a for a in announced if now - a.at <= ttl_s], [a for a in announced if now - a.at > ttl_s]


def _stale(a: WorkerBuilds, now: float, ttl_s: float) -> str:
    return (f"builds of host {a.host} ignored: last announced {round((now - a.at) / 60)} min ago, more than "
            f"BENCHFLEET_ANNOUNCE_TTL_S ({round(ttl_s)} s); its workers are not running")


def check_builds(spec: CampaignSpec, source: SpecSource, announced: list[WorkerBuilds], *,
                 now: float = 0.0, ttl_s: float = 0.0, pool: str | None = None) -> tuple[list[FieldError], list[str]]:
    """An error for every target whose build no worker of ``pool`` (the spec's pool when None) has;
    a note for a build that only some of the pool's hosts have (runs landing on the others fail).
    Announcements older than ``ttl_s`` at ``now`` count for nothing (0: none expires)."""
    pool = spec.pool if pool is None else pool
    errors: list[FieldError] = []
    announced, stale = fresh(announced, now, ttl_s)
    notes = [_stale(a, now, ttl_s) for a in stale]
    hosts = {a.host: set(a.names()) for a in announced}
    for i, t in enumerate(spec.targets):
        if not isinstance(t, ManagedTarget) or t.build is None:
            continue
        # An error says it too when only a host that stopped announcing had the build.
        gone = "".join(f"; {_stale(a, now, ttl_s)}" for a in stale if t.build in a.names())
        if not hosts:
            errors.append(source.error(("targets", i, "build"), (
                f"build {t.build!r}: no worker of pool {pool!r} has announced its builds yet; start the "
                f"pool's workers (they announce at connect), or register it with worker builds add {t.build} ..."
                + gone)))
            continue
        having = sorted(h for h, names in hosts.items() if t.build in names)
        if not having:
            known = sorted(set().union(*hosts.values()))
            near = closest(t.build, known)
            errors.append(source.error(("targets", i, "build"), (
                f"build {t.build!r} is not registered on any worker of pool {pool!r}{did_you_mean(near)} (announced: "
                f"{', '.join(known) or 'none'}); register it on each worker: worker builds add {t.build} "
                "--debian VERSION | --tarball FILE | --dir PATH" + gone), near))
        elif len(having) < len(hosts):
            missing = sorted(set(hosts) - set(having))
            notes.append(f"targets[{i}] ({t.name}): build {t.build} is not on {', '.join(missing)} (pool {pool}); "
                         "runs taken there fail")
    return errors, notes
