"""The spec's workloads and the table shape they run on (sysbench's tests, options and
--tables/--table-size); part of spec_version (history in spec.py)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, Strict, WithJsonSchema, field_validator, model_validator

from services.common.spec.fields import NAME_PATTERN, Frozen, Int, shown
from services.common.spec.problems import FieldProblems, Problem, closest, did_you_mean
from services.workload.registry import OPTION_LIMITS, RAND_TYPES, WORKLOADS

#: sysbench options that change the prepared schema, which the worker's prepare does not vary yet.
PREPARE_FIXED = frozenset({"secondary", "create_secondary"})


class DataShape(Frozen):
    """The sbtest tables a workload runs on (sysbench's --tables, --table-size, engine)."""

    tables: Annotated[Int, Field(ge=1, le=1024)] = 1
    table_size: Annotated[Int, Field(ge=1, le=2_000_000_000)] = 10_000
    engine: Annotated[Literal["InnoDB", "MyISAM", "Aria"], WithJsonSchema({"anyOf": [
        {"enum": ["InnoDB", "MyISAM", "Aria"]},
        {"type": "string", "pattern": "^(?:[iI][nN][nN][oO][dD][bB]|[mM][yY][iI][sS][aA][mM]|[aA][rR][iI][aA])$"}]})] \
        = "InnoDB"

    @field_validator("engine", mode="before")
    @classmethod
    def _engine_case(cls, v: Any) -> Any:
        known = {"innodb": "InnoDB", "myisam": "MyISAM", "aria": "Aria"}
        return known.get(str(v).lower(), v) if isinstance(v, str) else v

    def marker(self, auto_inc: bool = True) -> str:
        """A short string that identifies the shape, stored beside prepared tables. ``auto_inc``
        False (sysbench's --auto_inc=off: id without AUTO_INCREMENT) is another table shape."""
        return f"{self.tables}x{self.table_size}:{self.engine}" + ("" if auto_inc else ":noautoinc")


class WorkloadSpec(Frozen):
    """One test of the campaign, with sysbench option overrides and a row label for tables."""

    name: Annotated[str, Field(max_length=64)]
    label: Annotated[str, Field(pattern=NAME_PATTERN)] | None = None
    options: dict[str, Annotated[int, Strict()] | Annotated[float, Strict()] | Annotated[bool, Strict()] | str] = Field(
        default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _from_string(cls, v: Any) -> Any:
        return {"name": v} if isinstance(v, str) else v

    @field_validator("name")
    @classmethod
    def _known(cls, v: str) -> str:
        if v not in WORKLOADS:
            near = closest(v, WORKLOADS)
            known = "" if near else f"; known: {', '.join(sorted(WORKLOADS))}"
            raise FieldProblems([Problem("", f"unknown workload {shown(v)!r}{did_you_mean(near)}{known}", near)])
        return v

    @model_validator(mode="after")
    def _options_known(self) -> "WorkloadSpec":
        problems = [p for key, value in self.options.items() if (p := self._option_problem(key, value))]
        if problems:
            raise FieldProblems(problems)
        return self

    def _option_problem(self, key: str, value: Any) -> Problem | None:
        """What is wrong with one option of this workload, or None."""
        accepted = WORKLOADS[self.name].options
        where = f"options.{shown(key)}"
        if key not in accepted:
            near = closest(key, accepted)
            listed = "" if near else f" (accepted: {', '.join(sorted(accepted))})"
            return Problem(where, f"not an option of {self.name}{did_you_mean(near)}{listed}", near)
        default = accepted[key]
        if isinstance(default, bool) and not isinstance(value, bool):
            return Problem(where, "must be true or false")
        if isinstance(default, int) and not isinstance(default, bool):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                return Problem(where, "must be a whole number >= 0")
            if value > OPTION_LIMITS[key]:
                return Problem(where, f"must be <= {OPTION_LIMITS[key]:,}")
        if key == "rand_type" and value not in RAND_TYPES:
            near = closest(str(value), RAND_TYPES)
            return Problem(where, f"must be one of {', '.join(RAND_TYPES)}{did_you_mean(near)}", near)
        if key in PREPARE_FIXED and value != default:
            # The worker prepares sysbench's default table shape only; refusing beats a run
            # that silently measures another schema than the one asked for.
            return Problem(where, f"only the sysbench default ({str(default).lower()}) is "
                                  "supported; the worker's prepare builds that table shape")
        return None

    @property
    def key(self) -> str:
        """The row name in tables and the workload part of run ids."""
        return self.label or self.name

    def option(self, key: str) -> Any:
        """The effective value of a sysbench option: the override, else sysbench's default."""
        return self.options.get(key, WORKLOADS[self.name].options[key])
