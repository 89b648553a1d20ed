"""RabbitMQ's management HTTP API as the collector reads it: which broker users' connections consume
the runs queues, and since when (the broker's word on whether a run's taker still lives)."""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from urllib.parse import quote, unquote, urlsplit

from services.common.bus.broker import Names
from services.common.config import Settings
from services.common.errors import BusError

#: The management plugin's port, as deploy/ensure-services enables it (BENCHFLEET_AMQP_MANAGEMENT_PORT).
DEFAULT_PORT = 15672
#: Seconds to wait for an answer: the collector handles its messages in order while it waits.
TIMEOUT_S = 5.0


@dataclass(frozen=True)
class RunsConsumer:
    """A consumer of a runs queue as the broker shows it: its connection's user and name, when
    that connection opened (the broker's clock, seconds since the epoch), and the queue."""

    user: str
    connection: str
    connected_at: float
    queue: str


@dataclass(frozen=True)
class BrokerView:
    """The consumers of the namespace's runs queues at one moment."""

    consumers: tuple[RunsConsumer, ...]


def api_url(settings: Settings) -> str:
    """The management API's base URL: the setting, else http on the broker's host and DEFAULT_PORT."""
    if settings.amqp_management_url:
        return settings.amqp_management_url.rstrip("/")
    host = urlsplit(settings.amqp_url).hostname or "127.0.0.1"
    return f"http://{host}:{DEFAULT_PORT}"


def basic_auth(settings: Settings) -> str:
    """The Authorization header for the management API: the AMQP URL's user and password."""
    parts = urlsplit(settings.amqp_url)
    user, password = unquote(parts.username or "guest"), unquote(parts.password or "guest")
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


class ManagementApi:
    """Reads the broker's view of the runs queues' consumers, as the AMQP URL's user (it needs the
    monitoring tag to see other users' connections); BusError, naming the URL, when it cannot."""

    def __init__(self, settings: Settings, timeout_s: float = TIMEOUT_S):
        parts = urlsplit(settings.amqp_url)
        self.base = api_url(settings)
        self.vhost = unquote(parts.path[1:]) if len(parts.path) > 1 else "/"
        self._auth = basic_auth(settings)
        self.names = Names(settings.namespace)
        self.timeout_s = timeout_s

    def _get(self, path: str) -> list[dict]:
        url = f"{self.base}{path}"
        try:
            req = urllib.request.Request(url, headers={"Authorization": self._auth})
            with urllib.request.urlopen(req, timeout=self.timeout_s) as r:
                rows = json.load(r)
        except urllib.error.HTTPError as e:
            raise BusError(f"management API {url}: HTTP {e.code} {e.reason} (the collector's broker user needs "
                           "the monitoring tag: deploy/ensure-services rabbitmq)") from None
        except (urllib.error.URLError, OSError, ValueError) as e:
            raise BusError(f"management API {url}: {getattr(e, 'reason', e)}") from None
        if not isinstance(rows, list):
            raise BusError(f"management API {url}: expected a list, got {type(rows).__name__}")
        return rows

    def runs_consumers(self) -> BrokerView:
        """Every consumer of a runs queue of the namespace, with its connection's opening time."""
        vhost = quote(self.vhost, safe="")
        prefix = self.names.runs_queue("")
        opened = {c.get("name"): float(c.get("connected_at") or 0) / 1000.0
                  for c in self._get(f"/api/vhosts/{vhost}/connections?columns=name,connected_at")}
        out = []
        for c in self._get(f"/api/consumers/{vhost}"):
            queue = str((c.get("queue") or {}).get("name", ""))
            channel = c.get("channel_details") or {}
            connection = str(channel.get("connection_name", ""))
            if queue.startswith(prefix):
                # Connections are read first: one the first read did not list opened after it,
                # so after any claim already stored (inf: newer than every claim).
                out.append(RunsConsumer(user=str(channel.get("user", "")), connection=connection,
                                        connected_at=opened.get(connection, float("inf")), queue=queue))
        return BrokerView(tuple(out))
