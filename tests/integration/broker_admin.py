"""The tests' own broker users and vhosts, made and removed through RabbitMQ's management API as the
tests' administrator (guest): a request costs milliseconds, where each rabbitmqctl starts an Erlang VM
(about 0.5 s of CPU). What an operator runs, deploy/ensure-services, keeps to rabbitmqctl and is tested
as it is; this is only the tests' setup and cleanup."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from urllib.parse import quote

from services.common.bus.management import api_url, basic_auth
from services.common.config import Settings


class BrokerAdmin:
    """Users, permissions and vhosts on the broker of ``settings`` (its AMQP URL's user must be an
    administrator, as the local broker's guest is)."""

    def __init__(self, settings: Settings, timeout_s: float = 30):
        self._auth = basic_auth(settings)
        self.base = api_url(settings)
        self.timeout_s = timeout_s

    def _call(self, method: str, path: str, body: dict | None = None, *, missing_ok: bool = False) -> None:
        req = urllib.request.Request(f"{self.base}/api/{path}", method=method,
                                     data=None if body is None else json.dumps(body).encode(),
                                     headers={"Authorization": self._auth, "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s):
                pass
        except urllib.error.HTTPError as e:
            if not (missing_ok and e.code == 404):
                raise AssertionError(f"management API {method} {path}: HTTP {e.code} {e.read()[:300]!r}") from None

    def add_user(self, name: str, password: str, tags: str = "") -> None:
        self._call("PUT", f"users/{quote(name, safe='')}", {"password": password, "tags": tags})

    def set_permissions(self, vhost: str, user: str, configure: str, write: str, read: str) -> None:
        self._call("PUT", f"permissions/{quote(vhost, safe='')}/{quote(user, safe='')}",
                   {"configure": configure, "write": write, "read": read})

    def delete_user(self, name: str) -> None:
        """Remove the user (its connections are closed); one that is not there is no error."""
        self._call("DELETE", f"users/{quote(name, safe='')}", missing_ok=True)

    def delete_vhost(self, name: str) -> None:
        """Remove the vhost and all in it; one that is not there is no error."""
        self._call("DELETE", f"vhosts/{quote(name, safe='')}", missing_ok=True)
