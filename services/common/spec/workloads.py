"""The spec's workloads and the table shape they run on (sysbench's tests, options and
--tables/--table-size); part of spec_version (history in spec.py)."""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import Field, Strict, ValidationInfo, WithJsonSchema, field_validator, model_validator

from services.common.spec.fields import NAME_PATTERN, Frozen, Int, shown
from services.common.spec.windows import DurationByThreads, WarmupByThreads
from services.common.spec.problems import FieldProblems, Problem, closest, did_you_mean
from services.workload.registry import (
    COMMON_OPTIONS,
    FLOAT_LIMITS,
    OLTP_OPTIONS,
    OPTION_LIMITS,
    OPTION_MINIMUM,
    PS_MODES,
    RAND_TYPES,
    TABLE_OPTIONS,
    WORKLOADS,
    Workload,
)

#: Engines a spec may name in any case, written as the server lists them (SHOW ENGINES); any
#: other engine name is passed on as written, and prepare refuses one the server lacks.
KNOWN_ENGINES = {"innodb": "InnoDB", "myisam": "MyISAM", "aria": "Aria", "rocksdb": "ROCKSDB",
                 "memory": "MEMORY", "myrocks": "ROCKSDB"}
ENGINE_PATTERN = r"^[A-Za-z][A-Za-z0-9_]{0,63}$"
#: A custom script's name: the file NAME.lua in a directory the worker's operator listed
#: (BENCHFLEET_LUA_DIRS); no path, no dot, so it cannot leave those directories.
SCRIPT_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$"
#: A custom script's own option: sysbench reads '_' as '-', so names are checked in that form.
SCRIPT_OPTION_PATTERN = r"^[a-z][a-z0-9_]{0,63}$"
#: A text value of a custom script's option: no spaces, quotes or '/', so no path either.
SCRIPT_VALUE_PATTERN = r"^[A-Za-z0-9_.,:+-]{0,128}$"
#: sysbench's own options (sysbench --help, 1.0.20 and 1.1), which a script's options must not
#: shadow: the run sets them (connection, threads, time, seed, ...) or the spec has a field.
SYSBENCH_GLOBALS = frozenset("""threads events time forced-shutdown thread-stack-size rate report-interval
report-checkpoints debug validate help version config-file tx-rate max-requests max-time num-threads
verbosity percentile histogram luajit-cmd warmup-time tables table-size mysql-storage-engine""".split())
SYSBENCH_GLOBAL_PREFIXES = ("mysql-", "pgsql-", "db-", "rand-")


MAX_TABLES = 1024
MAX_TABLE_SIZE = 2_000_000_000


class DataShape(Frozen):
    """The sbtest tables a workload runs on (sysbench's --tables, --table-size, engine)."""

    tables: Annotated[Int, Field(ge=1, le=MAX_TABLES)] = 1
    table_size: Annotated[Int, Field(ge=1, le=MAX_TABLE_SIZE)] = 10_000
    #: sysbench's --mysql_storage_engine: any engine the target's server has (prepare checks).
    engine: Annotated[str, Field(pattern=ENGINE_PATTERN), WithJsonSchema({
        "type": "string", "pattern": ENGINE_PATTERN,
        "examples": sorted(set(KNOWN_ENGINES.values()))})] = "InnoDB"

    @field_validator("engine", mode="before")
    @classmethod
    def _engine_case(cls, v: Any) -> Any:
        return KNOWN_ENGINES.get(str(v).lower(), v) if isinstance(v, str) else v

    def marker(self, auto_inc: bool = True, secondary: bool = False, create_secondary: bool = True) -> str:
        """A short string that identifies the shape, stored beside prepared tables. ``auto_inc``
        False (sysbench's --auto_inc=off: id without AUTO_INCREMENT), ``secondary`` (id under a
        plain KEY instead of the PRIMARY KEY) and ``create_secondary`` False (no index on k)
        are other table shapes."""
        return (f"{self.tables}x{self.table_size}:{self.engine}" + ("" if auto_inc else ":noautoinc")
                + (":secondary" if secondary else "") + ("" if create_secondary else ":nok"))


class WorkloadSpec(Frozen):
    """One test of the campaign, with sysbench option overrides and a row label for tables: a
    registered workload (``name``) or a Lua script the workers' operator installed (``script``)."""

    #: A custom sysbench script, NAME.lua in a directory of the worker's BENCHFLEET_LUA_DIRS;
    #: only driver: sysbench runs it. Declared before ``name``, which defaults to it.
    script: Annotated[str, Field(max_length=64)] | None = None
    name: Annotated[str, Field(max_length=64)]
    label: Annotated[str, Field(pattern=NAME_PATTERN)] | None = None
    #: This workload's --tables and --table_size, over the spec's ``data``.
    tables: Annotated[Int, Field(ge=1, le=MAX_TABLES)] | None = None
    table_size: Annotated[Int, Field(ge=1, le=MAX_TABLE_SIZE)] | None = None
    #: This workload's windows by thread count, replacing the campaign's from its lowest count on
    #: (a read-write transaction outlasts a point select at the same clients).
    duration_by_threads: DurationByThreads | None = None
    #: This workload's longer warm-ups by thread count, read as its ``duration_by_threads``.
    warmup_by_threads: WarmupByThreads | None = None
    options: dict[str, Annotated[int, Strict()] | Annotated[float, Strict()] | Annotated[bool, Strict()] | str] = Field(
        default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _from_string(cls, v: Any) -> Any:
        if isinstance(v, str):
            return {"name": v}
        if isinstance(v, dict) and isinstance(v.get("script"), str):
            script = v["script"]
            if not re.fullmatch(SCRIPT_PATTERN, script):
                # Alone, before name defaults to it: a bad script is one error, not two.
                raise FieldProblems([Problem("script", f"{shown(script)!r} is not a script name: letters, digits, "
                                                       "'_' and '-', without '.lua', a path or '..' (the worker "
                                                       "finds NAME.lua in its BENCHFLEET_LUA_DIRS)")])
            if "name" not in v:
                return {**v, "name": script}
        return v

    @field_validator("name")
    @classmethod
    def _known(cls, v: str, info: ValidationInfo) -> str:
        if "script" in info.data and info.data["script"] is not None:
            if v != info.data["script"]:
                raise ValueError("a script workload is named by its script; use label for another row name")
            return v
        if v not in WORKLOADS:
            near = closest(v, WORKLOADS)
            known = "" if near else f"; known: {', '.join(sorted(WORKLOADS))}"
            raise FieldProblems([Problem("", f"unknown workload {shown(v)!r}{did_you_mean(near)}{known}", near)])
        return v

    @model_validator(mode="after")
    def _options_known(self) -> "WorkloadSpec":
        check = self._script_option_problem if self.script is not None else self._option_problem
        problems = [p for key, value in self.options.items() if (p := check(key, value))]
        if problems:
            raise FieldProblems(problems)
        return self

    def _option_problem(self, key: str, value: Any) -> Problem | None:
        """What is wrong with one option of this workload, or None."""
        accepted = WORKLOADS[self.name].options
        where = f"options.{shown(key)}"
        if key not in accepted:
            if key in ("tables", "table_size"):
                return Problem(where, f"not an option: give the workload's own {key} beside its name "
                                      f"({{name: {self.name}, {key}: ...}}), or data.{key} for every workload")
            near = closest(key, accepted)
            listed = "" if near else f" (accepted: {', '.join(sorted(accepted))})"
            return Problem(where, f"not an option of {self.name}{did_you_mean(near)}{listed}", near)
        return _value_problem(where, key, accepted[key], value)

    def _script_option_problem(self, key: str, value: Any) -> Problem | None:
        """What is wrong with one option of a custom script, or None: sysbench's own options
        keep their meaning (COMMON_OPTIONS are checked as for any workload), others are the
        script's, with plain names and values."""
        where = f"options.{shown(key)}"
        if key in COMMON_OPTIONS or key in TABLE_OPTIONS or key == "auto_inc":
            return _value_problem(where, key, {**COMMON_OPTIONS, **OLTP_OPTIONS}[key], value)
        if not re.fullmatch(SCRIPT_OPTION_PATTERN, key):
            return Problem(where, "a script's option name is lower-case letters, digits and '_'")
        dashed = key.replace("_", "-")
        if dashed in SYSBENCH_GLOBALS or dashed.startswith(SYSBENCH_GLOBAL_PREFIXES):
            return Problem(where, f"is sysbench's own --{dashed}, which the run sets or the spec has a field for "
                                  "(docs/drivers.md has the table)")
        if isinstance(value, str) and not re.fullmatch(SCRIPT_VALUE_PATTERN, value):
            return Problem(where, "a text value is letters, digits and _ . , : + - (no spaces, quotes or paths)")
        return None

    @property
    def key(self) -> str:
        """The row name in tables and the workload part of run ids."""
        return self.label or self.name

    def option(self, key: str) -> Any:
        """The effective value of a sysbench option: the override, else sysbench's default."""
        if key in self.options:
            return self.options[key]
        if self.script is not None:
            return {**OLTP_OPTIONS, **COMMON_OPTIONS}[key]
        return WORKLOADS[self.name].options[key]

    @property
    def registered(self) -> Workload | None:
        """The registered workload this one runs; None for a script."""
        return None if self.script is not None else WORKLOADS[self.name]

    def data_for(self, data: DataShape) -> DataShape:
        """The table shape this workload runs on: ``data`` with its own tables and table_size."""
        own = {k: v for k, v in (("tables", self.tables), ("table_size", self.table_size)) if v is not None}
        return data.model_copy(update=own) if own else data


def _value_problem(where: str, key: str, default: object, value: Any) -> Problem | None:
    """What is wrong with ``value`` for the sysbench option ``key`` whose default is ``default``."""
    if isinstance(default, bool):
        return None if isinstance(value, bool) else Problem(where, "must be true or false")
    if isinstance(default, int):
        low = OPTION_MINIMUM.get(key, 0)
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            return Problem(where, f"must be a whole number >= {low}")
        if value > OPTION_LIMITS[key]:
            return Problem(where, f"must be <= {OPTION_LIMITS[key]:,}")
        return None
    if isinstance(default, float):
        low, high, low_in, high_in = FLOAT_LIMITS[key]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
            return Problem(where, "must be a number")
        if value < low or value > high or (value == low and not low_in) or (value == high and not high_in):
            return Problem(where, f"must be {'>=' if low_in else '>'} {low:g} and {'<=' if high_in else '<'} {high:g}")
        return None
    for choice_key, choices in (("rand_type", RAND_TYPES), ("db_ps_mode", PS_MODES)):
        if key == choice_key and value not in choices:
            near = closest(str(value), choices)
            return Problem(where, f"must be one of {', '.join(choices)}{did_you_mean(near)}", near)
    if not isinstance(value, str):
        return Problem(where, "must be text")
    return None
