"""What the three CLIs share: exit codes, defined once, and ``run_main``, which turns the error
tree into one-line messages and exit codes so no command ends in a traceback."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Callable

from services.common import logs
from services.common.config import Settings, settings_from
from services.common.errors import BenchfleetError, ConnectError, UsageError

#: The command did what was asked.
EXIT_OK = 0
#: The command ran, and what it followed failed (runs failed, a run could not be measured).
EXIT_FAILED = 1
#: Bad input: a spec, a flag, a setting, an unknown campaign. Nothing was done.
EXIT_USAGE = 2
#: RabbitMQ or the results DB could not be reached, or refused us.
EXIT_CONNECT = 3
#: `--fail-on-collapse` found a collapsed cell (the report is still written).
EXIT_COLLAPSE = 4
#: `collector compare --fail-on-slower` found a cell of B significantly slower than A beyond the
#: threshold (the comparison is still written): a CI regression gate.
EXIT_SLOWER = 5
#: Interrupted by Ctrl-C (128 + SIGINT, as shells report it).
EXIT_INTERRUPTED = 130
#: Whoever read our output went away (`... | head`): 128 + SIGPIPE, as shell tools report it.
EXIT_BROKEN_PIPE = 141

EXIT_CODES_HELP = (
    f"exit codes: {EXIT_OK} ok, {EXIT_FAILED} runs failed, {EXIT_USAGE} bad input (nothing done), "
    f"{EXIT_CONNECT} broker or results DB unreachable, {EXIT_COLLAPSE} collapse found (--fail-on-collapse), "
    f"{EXIT_SLOWER} significantly slower (--fail-on-slower), {EXIT_INTERRUPTED} interrupted"
)

Command = Callable[[argparse.Namespace, Settings], int]


def error(message: str) -> None:
    """Print ``message`` as ``error: ...`` lines on stderr (one per line of the message)."""
    for line in str(message).splitlines() or [""]:
        print(f"error: {line}", file=sys.stderr)


def _quiet_stdout() -> None:
    # Python flushes stdout at exit and would raise BrokenPipeError again there.
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


def run_main(service: str, parse: Callable[[], argparse.Namespace]) -> int:
    """Parse, resolve settings, configure logs and run ``args.fn(args, settings)``; map the
    error tree to exit codes. A command prints what happened itself, so it logs warnings only
    unless asked; a long-running one (``set_defaults(long_running=True)``) logs at the
    settings' level."""
    try:
        args = parse()
        settings = settings_from(args)
        explicit = getattr(args, "log_level", None) or os.environ.get("BENCHFLEET_LOG_LEVEL")
        long_running = getattr(args, "long_running", False)
        logs.configure(service, settings.log_level if explicit or long_running else "warning")
        return int(args.fn(args, settings))
    except UsageError as e:
        error(str(e))
        return EXIT_USAGE
    except ConnectError as e:
        error(str(e))
        return EXIT_CONNECT
    except BenchfleetError as e:
        error(str(e))
        return EXIT_FAILED
    except KeyboardInterrupt:
        print(file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        _quiet_stdout()
        return EXIT_BROKEN_PIPE
