"""A /metrics endpoint on a registry of its own, so several services (or tests) share a process."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, generate_latest, start_http_server


class MetricsEndpoint:
    """Base of the worker's and the collector's metrics: a registry, its HTTP server, a scrape."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self._server: Any = None

    def start_http(self, addr: str = "127.0.0.1", port: int = 0) -> int:
        """Serve /metrics; returns the bound port (port 0 picks a free one)."""
        self._server, _ = start_http_server(port, addr=addr, registry=self.registry)
        return self._server.server_port

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def scrape(self) -> bytes:
        """The exposition text, as Prometheus would read it."""
        return generate_latest(self.registry)
