"""Checking managed targets' ``build:`` against the builds the pool's workers announced.

Workers announce their registered builds on the bus at connect and when their registry changes;
the collector keeps the last announcement per host and pool in the results DB. Pure: the caller
reads the announcements (services/scheduler/preflight.py).
"""

from __future__ import annotations

from services.common.messages import WorkerBuilds
from services.common.spec import CampaignSpec, ManagedTarget
from services.common.specfile import FieldError, SpecSource


def check_builds(spec: CampaignSpec, source: SpecSource,
                 announced: list[WorkerBuilds]) -> tuple[list[FieldError], list[str]]:
    """An error for every target whose build no worker of the pool has; a note for a build that
    only some of the pool's hosts have (runs landing on the others fail)."""
    errors: list[FieldError] = []
    notes: list[str] = []
    hosts = {a.host: set(a.names()) for a in announced}
    for i, t in enumerate(spec.targets):
        if not isinstance(t, ManagedTarget) or t.build is None:
            continue
        if not hosts:
            errors.append(source.error(("targets", i, "build"), (
                f"build {t.build!r}: no worker of pool {spec.pool!r} has announced its builds yet; start the "
                f"pool's workers (they announce at connect), or register it with worker builds add {t.build} ...")))
            continue
        having = sorted(h for h, names in hosts.items() if t.build in names)
        if not having:
            known = sorted(set().union(*hosts.values()))
            errors.append(source.error(("targets", i, "build"), (
                f"build {t.build!r} is not registered on any worker of pool {spec.pool!r} (announced: "
                f"{', '.join(known) or 'none'}); register it on each worker: worker builds add {t.build} "
                "--debian VERSION | --tarball FILE | --dir PATH")))
        elif len(having) < len(hosts):
            missing = sorted(set(hosts) - set(having))
            notes.append(f"targets[{i}] ({t.name}): build {t.build} is not on {', '.join(missing)}; "
                         "runs taken there fail")
    return errors, notes
