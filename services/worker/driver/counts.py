"""What a stretch of a run did, in counts that add up: the one record the native driver's load
processes, both drivers' progress and the result's totals are made from. Plain data, so a load
process imports no more than it needs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping


@dataclass(frozen=True)
class Counts:
    """What a stretch of a run did (one connection, one load process, one phase); counts of
    different stretches add up with ``merge`` or ``+``, error codes included."""

    transactions: int = 0
    reads: int = 0
    writes: int = 0
    other: int = 0
    #: Statements that failed with an error outside the run's ignore list (each one ends the run).
    errors: int = 0
    #: Statements that failed with an ignored error: the transaction was restarted.
    ignored_errors: int = 0
    #: Lost connections of the ignore list, reconnected.
    reconnects: int = 0
    #: Failed statements by MySQL error code (as text), ignored and reconnected ones included.
    errors_by_code: Mapping[str, int] = field(default_factory=dict)

    @property
    def queries(self) -> int:
        return self.reads + self.writes + self.other

    def merge(self, other: Counts) -> Counts:
        """Both stretches together (a new Counts; neither operand changes)."""
        if other.errors_by_code:
            codes = dict(self.errors_by_code)
            for code, n in other.errors_by_code.items():
                codes[code] = codes.get(code, 0) + n
        else:
            # Nothing to add: share the mapping (no Counts ever changes its own).
            codes = self.errors_by_code
        return Counts(
            transactions=self.transactions + other.transactions,
            reads=self.reads + other.reads,
            writes=self.writes + other.writes,
            other=self.other + other.other,
            errors=self.errors + other.errors,
            ignored_errors=self.ignored_errors + other.ignored_errors,
            reconnects=self.reconnects + other.reconnects,
            errors_by_code=codes,
        )

    __add__ = merge
