"""Where a report command reads a campaign from: the results DB (a campaign id or name) or an
export file (`collector export`'s JSON), read into ``CampaignData`` as ``reporting.load`` reads
one from the DB, so `compare FILE_A FILE_B` needs no results DB."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from services.common.errors import ExportFileError
from services.common.messages.results import RunResult
from services.common.results.cut_windows import rejudge_rows
from services.common.results.rows import ResultRow, TargetBuild
from services.common.store.campaign_file import CampaignExport, decode_export
from services.reporting.analysis import CampaignData
from services.reporting.load import describe_builds


@dataclass(frozen=True)
class CampaignRef:
    """A campaign argument as given: ``path`` set when it names an export file."""

    text: str
    path: Path | None

    @classmethod
    def parse(cls, text: str) -> "CampaignRef":
        """A file when ``text`` is an existing file or ends in .json (campaign ids never do)."""
        p = Path(text)
        return cls(text, p if p.is_file() or text.endswith(".json") else None)

    @property
    def is_file(self) -> bool:
        return self.path is not None

    def read_export(self) -> CampaignExport:
        """The export file's campaign; ExportFileError (a usage error) naming the file."""
        assert self.path is not None
        try:
            text = self.path.read_bytes()
        except OSError as e:
            raise ExportFileError(f"{self.text}: {e.strerror} (a file written by collector export)") from None
        return decode_export(text, self.text)


def load_export(export: CampaignExport) -> CampaignData:
    """The exported campaign with every whole result in its rows (what ``load`` reads with
    ``with_results``)."""
    c = export.campaign
    spec = c.spec
    settings = spec.public_dump()
    settings["campaign_id"] = c.campaign_id
    describe_builds(settings, _builds(export.results))
    rows = sorted(rejudge_rows((ResultRow.of(r) for r in export.results), spec),
                  key=lambda r: (r.workload, r.threads, r.target, r.repetition))
    return CampaignData(
        campaign_id=c.campaign_id, name=c.name, state=c.state,
        targets=tuple(t.name for t in spec.targets), baseline=spec.baseline_name,
        workloads=tuple(w.key for w in spec.workloads), threads=tuple(sorted(spec.threads)),
        settings=settings, runs=tuple(rows), created_at=c.created_at,
    )


def _builds(results: list[RunResult]) -> list[TargetBuild]:
    """The distinct builds each target ran, as the store's ``target_builds`` reads them."""
    seen = {(r.cell.target, r.server.build, r.server.build_version, r.server.server_sha256, r.server.malloc)
            for r in results if r.status == "ok"}
    return [TargetBuild(*b) for b in sorted(seen, key=lambda b: tuple(str(v) for v in b))]
