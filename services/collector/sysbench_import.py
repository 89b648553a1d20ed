"""`collector import-sysbench`: runs measured with plain sysbench 1.0 (its text output, with
--report-interval lines and, best, --histogram) as a campaign of the results DB, so old numbers
can be compared with `compare` and `history`.

Text in, a ``CampaignExport`` out (no I/O); the CLI imports it as it imports an exported campaign.
"""

from __future__ import annotations

import argparse
import math
import re
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from pydantic import ValidationError

from services.common.results import sysbench_output as so
from services.common.errors import ExportFileError, SysbenchOutputError
from services.common.store.campaign_file import CampaignExport, ExportedCampaign, ExportedRun
from services.common.messages.runs import Cell, run_id_of
from services.common.messages.results import RunResult
from services.common.spec.campaign import MAX_THREADS, CampaignSpec
from services.common.spec.fields import NAME_PATTERN
from services.common.store.campaigns import spec_hash

#: Where an imported target "was": a spec needs a host; the settings show this one.
IMPORTED_HOST = "sysbench-import"
#: The account an imported target names: the fleet never connects to one, and the output does not say.
IMPORTED_USER = "unknown"


def name_flag(flag: str) -> "Callable[[str], str]":
    """An argparse type for a flag that names a campaign or target: the spec's names (letters,
    digits, _ . -, up to 64), so a bad one is refused at the flag, naming it."""
    def check(text: str) -> str:
        if not re.fullmatch(NAME_PATTERN, text):
            raise argparse.ArgumentTypeError(f"{text[:80]!r} is not a name: letters, digits, '_', '.', '-', "
                                             "starting with a letter or digit, at most 64 characters")
        return text
    check.__name__ = flag
    return check


def count_flag(flag: str, high: int) -> "Callable[[str], int]":
    """An argparse type for a whole number from 1 to ``high``."""
    def check(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
        if not 1 <= value <= high:
            raise argparse.ArgumentTypeError(f"must be 1 to {high:,}, got {value}")
        return value
    check.__name__ = flag
    return check


#: Flags of `collector import-sysbench` checked where they are parsed (exit 2 naming the flag).
CAMPAIGN_FLAG = name_flag("campaign")
TARGET_FLAG = name_flag("target")
THREADS_FLAG = count_flag("threads", MAX_THREADS)
#: A campaign holds at most this many repetitions (the spec's repeat).
REPETITION_FLAG = count_flag("repetition", 1000)


def is_import(export: CampaignExport) -> bool:
    """Whether a stored campaign is itself an import of sysbench output (every target "was" at
    IMPORTED_HOST), which another import may add to; a campaign the fleet ran is not."""
    return all(getattr(t, "host", None) == IMPORTED_HOST for t in export.campaign.spec.targets)


@dataclass(frozen=True)
class SysbenchFile:
    """One sysbench output file and the cell it measured."""

    name: str
    text: str
    target: str
    workload: str
    #: None: read from the output's "Number of threads: N".
    threads: int | None
    repetition: int
    #: When the run ended (the file's modification time, if nothing better is known).
    ended_at: float


def threads_of(f: SysbenchFile) -> int:
    m = re.search(r"^Number of threads: (\d+)\s*$", f.text, re.M)
    found = int(m.group(1)) if m else None
    if f.threads is not None and found is not None and f.threads != found:
        raise ExportFileError(f"{f.name}: --threads {f.threads}, but the output says Number of threads: {found}")
    if f.threads is None and found is None:
        raise ExportFileError(f"{f.name}: no 'Number of threads' line: give --threads")
    return int(f.threads if f.threads is not None else found)  # type: ignore[arg-type]


def _interval_s(ivs: Sequence[so.Interval]) -> float:
    return ivs[1].second - ivs[0].second if len(ivs) > 1 else (ivs[0].second if ivs else 1.0)


def sysbench_result(f: SysbenchFile, campaign_id: str) -> RunResult:
    """The run ``f`` holds, as the result the sysbench driver would have stored for it."""
    try:
        final = so.parse_final(f.text)
    except SysbenchOutputError as e:
        raise ExportFileError(f"{f.name}: {e}") from None
    ivs = so.intervals(f.text)
    step = _interval_s(ivs)
    totals = so.totals(final)
    series = so.series(ivs, step)
    if step == 1.0:
        series = so.with_last_second(series, totals, final.total_time_s)
    m = re.search(r"^sysbench (\S+)", f.text, re.M)
    # sysbench's rates divide by its measured time, a little shorter than "total time" (thread
    # start-up): the time its q/s implies, so the imported q/s is the one it printed.
    rate = re.search(r"^\s*queries:\s+(\d+)\s+\(([0-9.]+) per sec\.\)", f.text, re.M)
    measured = int(rate.group(1)) / float(rate.group(2)) if rate and float(rate.group(2)) > 0 else final.total_time_s
    try:
        return _result(f, campaign_id, final, totals, series if step == 1.0 else type(series)(), measured, m)
    except ValidationError as e:
        err = e.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        raise ExportFileError(f"{f.name}: {where}: {err['msg']}") from None


def _result(f: SysbenchFile, campaign_id: str, final: so.FinalReport, totals: Any, series: Any, measured: float,
            version: "re.Match[str] | None") -> RunResult:
    cell = Cell(target=f.target, workload=f.workload, threads=threads_of(f))
    return RunResult(
        run_id=run_id_of(campaign_id, cell, f.repetition), campaign_id=campaign_id, cell=cell,
        repetition=f.repetition, status="ok", worker="sysbench-import", host=IMPORTED_HOST,
        started_at=f.ended_at - final.total_time_s, ended_at=f.ended_at, measured_s=measured,
        totals=totals, series=series, latency=so.latency(final),
        versions={"sysbench": version.group(1)} if version else {})


def campaign_of(files: Sequence[SysbenchFile], campaign_id: str, *, baseline: str | None = None,
                earlier: CampaignExport | None = None, now: float) -> CampaignExport:
    """The campaign ``campaign_id`` holding the runs of ``files``, added to what an earlier import
    of it holds (a run of the same cell and repetition replaces the earlier one)."""
    results = {r.run_id: r for r in (earlier.results if earlier else [])}
    for f in files:
        r = sysbench_result(f, campaign_id)
        results[r.run_id] = r
    ordered = sorted(results.values(), key=lambda r: (r.repetition, r.cell.workload, r.cell.threads, r.cell.target))
    targets = list(dict.fromkeys([t.name for t in earlier.campaign.spec.targets] if earlier else []))
    targets += [t for t in dict.fromkeys(r.cell.target for r in ordered) if t not in targets]
    workloads = list(dict.fromkeys(r.cell.workload for r in ordered))
    base = baseline or (earlier.campaign.baseline if earlier else targets[0])
    if base not in targets:
        raise ExportFileError(f"--baseline: {base!r} is none of the campaign's targets ({', '.join(targets)})")
    try:
        spec = CampaignSpec.model_validate({
            "name": campaign_id, "driver": "sysbench", "baseline": base,
            "description": "runs measured with plain sysbench 1.0, imported by collector import-sysbench",
            "targets": [{"name": t, "host": IMPORTED_HOST, "user": IMPORTED_USER} for t in targets], "workloads": workloads,
            "threads": sorted({r.cell.threads for r in ordered}),
            "duration": max(1, math.ceil(max(r.measured_s for r in ordered) - 0.05)),
            "repeat": max(r.repetition for r in ordered)})
    except ValidationError as e:
        err = e.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        raise ExportFileError(f"the imported campaign: {where}: {err['msg']}") from None
    try:
        runs = [ExportedRun(run_id=r.run_id, seq=i, target=r.cell.target, workload=r.cell.workload,
                            threads=r.cell.threads, repetition=r.repetition, state="done", attempts=1,
                            worker=r.worker, started_at=r.started_at, ended_at=r.ended_at, updated_at=now)
                for i, r in enumerate(ordered, 1)]
        return CampaignExport(
            campaign=ExportedCampaign(campaign_id=campaign_id, name=campaign_id, spec=spec, spec_hash=spec_hash(spec),
                                      pool="default", baseline=base, total_runs=len(runs), state="finished",
                                      created_at=earlier.campaign.created_at if earlier else now),
            runs=runs, results=ordered)
    except ValidationError as e:  # the flags are checked where parsed; this is the last word
        err = e.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        raise ExportFileError(f"the imported campaign: {where}: {err['msg']}") from None
