"""What the three CLIs share: exit codes, defined once, ``run_main``, which turns the error tree
into one-line messages and exit codes so no command ends in a traceback, and writing a rendering out."""

from __future__ import annotations

import argparse
import os
import sys
from importlib import metadata
from pathlib import Path
from typing import Any, Callable, NoReturn

from services.common import logs
from services.common.completion import SHELLS
from services.common.completion import Command as CompletionTree
from services.common.completion import script as completion_script
from services.common.config import Settings, load_settings_file, settings_from
from services.common.errors import BenchfleetError, BenchfleetRegression, ConnectError, UsageError
from services.common.terminal import escape_controls

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
#: `--fail-on-slower` found a cell significantly slower than its baseline beyond the threshold
#: (`collector compare`: B against A; `scheduler submit --wait`, `scheduler gate`: a target against
#: the campaign's baseline, and with `--confirm` again on a re-run of the failing cells): a CI gate.
EXIT_SLOWER = 5
#: Interrupted by Ctrl-C (128 + SIGINT, as shells report it).
EXIT_INTERRUPTED = 130
#: Whoever read our output went away (`... | head`): 128 + SIGPIPE, as shell tools report it.
EXIT_BROKEN_PIPE = 141

EXIT_CODES_HELP = f"""exit codes:
  {EXIT_OK}    ok
  {EXIT_FAILED}    runs failed, or a result could not be read or stored
  {EXIT_USAGE}    bad input: a spec, a flag, a setting, an unknown campaign (nothing was done)
  {EXIT_CONNECT}    RabbitMQ or the results DB unreachable, or refused us
  {EXIT_COLLAPSE}    a collapsed cell found (report --fail-on-collapse)
  {EXIT_SLOWER}    significantly slower (--fail-on-slower), and with --confirm slower again on a re-run;
       a spec's newest campaign slower than its last good one (history --changes --fail-on-slower)
  {EXIT_INTERRUPTED}  interrupted (Ctrl-C); a submitted campaign goes on
  {EXIT_BROKEN_PIPE}  the reader of the output went away (| head)

settings: flags, else BENCHFLEET_* environment variables, else the settings file
(BENCHFLEET_CONFIG, else ~/.config/benchfleet/settings.env, else /etc/benchfleet/settings.env,
written by deploy/ensure-services), else defaults."""



def version() -> str:
    """The installed benchfleet's version."""
    try:
        return metadata.version("benchfleet")
    except metadata.PackageNotFoundError:  # run from a checkout without installing it
        return "unknown"


class Parser(argparse.ArgumentParser):
    """An argparse parser whose errors are one line on stderr (no usage dump), exit 2, and whose
    help ends with the exit codes; its subcommand parsers are of the same kind."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        kwargs.setdefault("epilog", EXIT_CODES_HELP)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:  # type: ignore[override]
        error(f"{self.prog}: {message} (see {self.prog} --help)")
        raise SystemExit(EXIT_USAGE)

    def add_version(self) -> None:
        self.add_argument("--version", action="version", version=f"%(prog)s (benchfleet) {version()}",
                          help="print the version and exit")


Command = Callable[[argparse.Namespace, Settings], int]


class Deprecated(argparse.Action):
    """An old spelling of a flag, kept for a release: it still sets the new flag's value, warns on
    stderr naming the new spelling, and is left out of ``--help`` (one meaning per flag there)."""

    def __init__(self, option_strings: list[str], dest: str, *, instead: str, **kwargs: Any) -> None:
        self.instead = instead
        kwargs.setdefault("help", argparse.SUPPRESS)
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        print(f"warning: {option_string} is deprecated and will be removed: use {self.instead}", file=sys.stderr)
        setattr(namespace, self.dest, values)


def add_completion(parser: argparse.ArgumentParser, tree: Callable[[], CompletionTree]) -> None:
    """Make ``parser`` the `completion bash|zsh` command: it prints the completion script of the
    command ``tree`` returns (built when asked, so it holds every flag)."""
    prog = parser.prog.split()[0]
    parser.add_argument("shell", choices=SHELLS, help=f'the shell: eval "$({prog} completion bash)" in ~/.bashrc, '
                                                      f'or zsh in ~/.zshrc')

    def run(args: argparse.Namespace, settings: Settings) -> int:
        sys.stdout.write(completion_script(args.shell, tree()))
        return EXIT_OK

    parser.set_defaults(fn=run, secrets=False)


def percent(text: str) -> float:
    """A percentage flag's value (5 or 5%) as a fraction (0.05); 0 is allowed, 100 is not."""
    try:
        v = float(text.rstrip("%"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a percentage such as 5, got {text}") from None
    if not 0 <= v < 100:
        raise argparse.ArgumentTypeError(f"must be between 0 and 100, got {text}")
    return v / 100


def error(message: str) -> None:
    """Print ``message`` as ``error: ...`` lines on stderr (one per line of the message), its
    control characters escaped: a server's error text or a spec's key is shown, never obeyed."""
    # Split at newlines only: a carriage return or a separator inside a line is shown, not obeyed.
    for line in str(message).rstrip("\n").split("\n"):
        print(f"error: {escape_controls(line)}", file=sys.stderr)


def write_output(path: str | None, content: str | bytes) -> None:
    """A command's rendered output into the file ``path``, or to stdout without one; text has its
    control characters escaped (a run's error text, a name from an imported file), so printing
    it, now or later with ``cat``, cannot recolour or rewrite the terminal."""
    if isinstance(content, str):
        content = escape_controls(content)
    if path is None:
        sys.stdout.write(content if isinstance(content, str) else content.decode())
        return
    if isinstance(content, bytes):
        Path(path).write_bytes(content)
    else:
        Path(path).write_text(content, encoding="utf-8")


def _quiet_stdout() -> None:
    # Python flushes stdout at exit and would raise BrokenPipeError again there.
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


def run_main(service: str, parse: Callable[[], argparse.Namespace], *, settings_file: bool = True) -> int:
    """Parse, resolve settings, configure logs and run ``args.fn(args, settings)``; map the
    error tree to exit codes. A command prints what happened itself, so it logs warnings only
    unless asked; a long-running one (``set_defaults(long_running=True)``) logs at the
    settings' level. A command that connects nowhere (``set_defaults(secrets=False)``) reads no
    password file, so a user without access to the fleet's secrets can still run it. Without
    ``settings_file`` the settings file is not read (`scheduler validate --offline`)."""
    try:
        # Before parsing: flag defaults read variables too (worker --pool: BENCHFLEET_POOL).
        if settings_file:
            load_settings_file(os.environ, role="" if service == "scheduler" else service)
        args = parse()
        settings = settings_from(args, secrets=getattr(args, "secrets", True))
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
    except BenchfleetRegression as e:
        error(str(e))
        return EXIT_SLOWER
    except BenchfleetError as e:
        error(str(e))
        return EXIT_FAILED
    except KeyboardInterrupt:
        print(file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        _quiet_stdout()
        return EXIT_BROKEN_PIPE
