"""`scheduler validate`'s answer as data: what is wrong with a spec, field by field, and what was
left unchecked; printed as lines or as a versioned JSON document (``--json``).

Version history of the JSON document (``schema``):
  benchfleet.validation/1: file, ok, offline, runs, errors (file, line, field, message,
  suggestion), notes.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from services.common.errors import FieldError, SpecError
from services.common.spec.campaign import CampaignSpec

SCHEMA = "benchfleet.validation/1"

#: What `--offline` leaves out, because each needs the fleet's settings, its results DB or the
#: server installed on this host: the answer must not change when a settings file appears.
OFFLINE_SKIPPED = ("offline: not checked: a run's length against the fleet's max_run_s, target databases against "
                   "the results DB's name, managed targets' option names against a server binary, and build: "
                   "against the builds the pool's workers announced (submit checks them)")


@dataclass(frozen=True)
class Finding:
    """One wrong field: where (file, YAML line, field path), why, and the name probably meant."""

    file: str
    line: int | None
    field: str
    message: str
    suggestion: str | None = None

    @classmethod
    def of(cls, file: str, error: FieldError) -> "Finding":
        return cls(file, error.line, error.path, error.message, error.suggestion)


@dataclass(frozen=True)
class Validation:
    """The answer for one spec file: ok with its run count, or the wrong fields; notes on what was
    left to the workers or not checked."""

    file: str
    offline: bool
    runs: int | None
    errors: tuple[Finding, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.errors

    @classmethod
    def accepted(cls, file: str, spec: CampaignSpec, notes: list[str], *, offline: bool) -> "Validation":
        return cls(file, offline, spec.total_runs, (), tuple(notes))

    @classmethod
    def refused(cls, file: str, error: SpecError, *, offline: bool) -> "Validation":
        # Offline, what was left out is said whatever the outcome.
        return cls(file, offline, None, tuple(Finding.of(error.source, e) for e in error.errors),
                   (OFFLINE_SKIPPED,) if offline else ())

    def as_data(self) -> dict[str, Any]:
        """The JSON document `validate --json` prints."""
        return {"schema": SCHEMA, "file": self.file, "ok": self.ok, "offline": self.offline, "runs": self.runs,
                "errors": [asdict(e) for e in self.errors], "notes": list(self.notes)}
