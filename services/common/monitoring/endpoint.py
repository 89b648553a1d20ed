"""A /metrics endpoint on a registry of its own, so several services (or tests) share a process;
a service may serve more JSON documents beside it (the collector's service discovery)."""

from __future__ import annotations

import socket
import threading
from typing import Any, Callable, Iterable
from wsgiref.simple_server import WSGIRequestHandler, make_server

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.exposition import ThreadingWSGIServer, make_wsgi_app


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # scrapes every second: no access log
        pass


class MetricsEndpoint:
    """Base of the worker's and the collector's metrics: a registry, its HTTP server, a scrape."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self._server: Any = None
        #: Extra paths served as JSON: path -> function returning the body.
        self.routes: dict[str, Callable[[], bytes]] = {}

    def _app(self) -> Callable[..., Iterable[bytes]]:
        metrics = make_wsgi_app(self.registry)
        routes = self.routes

        def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
            route = routes.get(environ.get("PATH_INFO", ""))
            if route is None:
                return metrics(environ, start_response)
            body = route()
            start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
            return [body]

        return app

    def start_http(self, addr: str = "127.0.0.1", port: int = 0) -> int:
        """Serve /metrics (and ``routes``); returns the bound port (port 0 picks a free one)."""

        class Server(ThreadingWSGIServer):
            address_family = socket.AF_INET6 if ":" in addr else socket.AF_INET

        self._server = make_server(addr.strip("[]"), port, self._app(), Server, handler_class=_Quiet)
        threading.Thread(target=self._server.serve_forever, name="metrics-http", daemon=True).start()
        return int(self._server.server_port)

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def scrape(self) -> bytes:
        """The exposition text, as Prometheus would read it."""
        return generate_latest(self.registry)
