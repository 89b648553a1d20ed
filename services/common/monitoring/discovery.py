"""Prometheus file-based service discovery, for one host: each worker and collector announces
its /metrics endpoint by a small JSON file in the directory prometheus.yml watches. Several
hosts use the collector's HTTP service discovery instead (services/collector/http_sd.py)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
from pathlib import Path
from typing import TYPE_CHECKING, Iterator, Mapping

if TYPE_CHECKING:
    from services.common.config import Settings
    from services.common.monitoring.endpoint import MetricsEndpoint


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", text)


WILDCARDS = ("", "0.0.0.0", "::", "[::]")


def scrape_address(settings: "Settings", port: int) -> str:
    """``host:port`` where Prometheus on another host scrapes this process's /metrics."""
    host = settings.metrics_announce or (socket.getfqdn() if settings.metrics_addr in WILDCARDS else settings.metrics_addr)
    host = host.strip("[]")
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def write_sd_file(directory: str | os.PathLike[str], job: str, addr: str, port: int,
                  labels: Mapping[str, str] | None = None) -> Path:
    """Announce a /metrics endpoint to Prometheus' file-based discovery; returns the file written.

    The file is ``<directory>/<job>-<host>-<port>.json``, replaced atomically so Prometheus
    never reads half a file. A wildcard bind address is announced as this host's name.
    """
    host = socket.gethostname() if addr in WILDCARDS else addr
    hostport = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    path = Path(directory) / f"{_safe(job)}-{_safe(host)}-{port}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps([{"targets": [hostport], "labels": dict(labels or {})}], indent=2) + "\n")
    os.replace(tmp, path)
    return path


def remove_sd_file(path: str | os.PathLike[str]) -> None:
    """Withdraw an announcement, so a worker stopped on purpose does not page as down."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass



@contextlib.contextmanager
def announced(endpoint: "MetricsEndpoint", settings: "Settings", job: str,
              labels: Mapping[str, str] | None = None) -> Iterator[int]:
    """Serve ``endpoint``'s /metrics and announce it in ``settings.sd_dir`` while the block runs;
    on the way out withdraw the announcement first, so a service stopped on purpose is not
    paged as down, then stop serving."""
    from services.common import logs

    port = endpoint.start_http(settings.metrics_addr, settings.metrics_port)
    sd_file = write_sd_file(settings.sd_dir, job, settings.metrics_addr, port, labels) if settings.sd_dir else None
    logs.get().info(f"{job}_metrics", addr=settings.metrics_addr, port=port, sd_file=str(sd_file or ""))
    try:
        yield port
    finally:
        if sd_file is not None:
            remove_sd_file(sd_file)
        endpoint.close()
