"""structlog set-up: JSON lines on stderr, carrying campaign/run/target ids, never secrets."""

from __future__ import annotations

import logging
import re
import sys
from typing import Any

import structlog

_SECRET_KEYS = re.compile(r"pass(word)?|secret|token", re.I)
_URL_PASSWORD = re.compile(r"(amqps?://[^:/@\s]+:)[^@\s]+@")


def _scrub(_: Any, __: str, event: dict[str, Any]) -> dict[str, Any]:
    """Drop values of secret-looking keys and passwords inside URLs, whatever the caller passed."""
    for key in list(event):
        if _SECRET_KEYS.search(key):
            event[key] = "***"
        elif isinstance(event[key], str):
            event[key] = _URL_PASSWORD.sub(r"\1***@", event[key])
    return event


def configure(service: str, level: str = "info", stream: Any = None) -> None:
    """Configure structlog once per process; ``service`` is added to every line."""
    logging.basicConfig(level=logging.WARNING, stream=stream or sys.stderr, format="%(message)s")
    # pika logs connection attempts at INFO with full parameters, and a lost connection (a broker
    # restart) as ERROR lines carrying its own traceback, though the bus handles it: the bus
    # raises BusError and its callers log or print what happened in one line. So pika speaks
    # only when asked for debug logs, and then without its INFO lines.
    logging.getLogger("pika").setLevel(logging.WARNING if level.lower() == "debug" else logging.CRITICAL)
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            _scrub,
            structlog.processors.format_exc_info,
            structlog.processors.JSONRenderer(sort_keys=False),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(level.upper())),
        logger_factory=structlog.PrintLoggerFactory(file=stream or sys.stderr),
        cache_logger_on_first_use=False,
    )
    structlog.contextvars.clear_contextvars()
    structlog.contextvars.bind_contextvars(service=service)


def get(name: str | None = None) -> Any:
    return structlog.get_logger(name)
