"""Targets of a campaign renamed (`collector compare --map old=new`), so two campaigns whose
targets are named differently compare. Pure: it takes and returns ``CampaignData``."""

from __future__ import annotations

import dataclasses
from typing import Mapping

from services.common.results.rows import ResultRow
from services.reporting.analysis import CampaignData


def parse_map(items: list[str]) -> dict[str, str]:
    """``--map old=new`` items as a mapping; ValueError naming the item that is not OLD=NEW."""
    out: dict[str, str] = {}
    for item in items:
        old, sep, new = item.partition("=")
        if not sep or not old or not new:
            raise ValueError(f"--map: {item!r} is not OLD=NEW (a target name of campaign A, then B's name for it)")
        if old in out:
            raise ValueError(f"--map: {old!r} is mapped twice")
        out[old] = new
    return out


def rename_targets(data: CampaignData, names: Mapping[str, str]) -> CampaignData:
    """``data`` with its targets renamed (in runs, results, baseline and settings); ValueError naming
    a target it does not have, or a new name that collides with a target it keeps."""
    if not names:
        return data
    unknown = [old for old in names if old not in data.targets]
    if unknown:
        raise ValueError(f"--map: campaign {data.campaign_id} has no target {unknown[0]!r} "
                         f"(its targets: {', '.join(data.targets)})")
    renamed = [names.get(t, t) for t in data.targets]
    if len(set(renamed)) != len(renamed):
        raise ValueError(f"--map: two targets of campaign {data.campaign_id} would both be named "
                         f"{next(t for t in renamed if renamed.count(t) > 1)!r}")

    def row(r: ResultRow) -> ResultRow:
        if r.target not in names:
            return r
        result = r.result
        if result is not None:
            result = result.model_copy(update={"cell": result.cell.model_copy(update={"target": names[r.target]})})
        return dataclasses.replace(r, target=names[r.target], result=result)

    settings = dict(data.settings)
    if isinstance(settings.get("targets"), list):
        settings["targets"] = [dict(t, name=names.get(t.get("name"), t.get("name"))) if isinstance(t, dict) else t
                               for t in settings["targets"]]
    return dataclasses.replace(data, targets=tuple(renamed), baseline=names.get(data.baseline, data.baseline),
                               settings=settings, runs=tuple(row(r) for r in data.runs))
