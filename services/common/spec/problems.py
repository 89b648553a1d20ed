"""What a spec validator reports: every wrong field it found at once, each with the closest
right name when a name was misspelt ("did you mean")."""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Iterable


def closest(name: str, choices: Iterable[str], cutoff: float = 0.7) -> str | None:
    """The choice nearest to ``name`` (a typo of it), or None when nothing is near."""
    found = difflib.get_close_matches(name, sorted(set(choices)), n=1, cutoff=cutoff)
    return found[0] if found else None


def did_you_mean(suggestion: str | None) -> str:
    """`` (did you mean X?)`` for a message, or nothing."""
    return f" (did you mean {suggestion}?)" if suggestion else ""


@dataclass(frozen=True)
class Problem:
    """One wrong field, relative to the model that found it (``options.x``; empty: the model's own
    field), why, and the name the user probably meant."""

    field: str
    message: str
    suggestion: str | None = None

    @property
    def text(self) -> str:
        return f"{self.field}: {self.message}" if self.field else self.message


class FieldProblems(ValueError):
    """Raised by a validator that found several wrong fields; the spec loader reports each on its
    own line (pydantic keeps the exception in the error's context)."""

    def __init__(self, problems: list[Problem]):
        self.problems = list(problems)
        super().__init__("\n".join(p.text for p in self.problems))
