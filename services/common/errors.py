"""Every error benchfleet raises on purpose, in one tree, so a caller catches one family.

BenchfleetError
 ├── UsageError          bad input from the user: a spec, a setting, a flag (exit 2)
 │    ├── SpecError      a spec that cannot run (one FieldError per wrong field)
 │    ├── YamlProblem    YAML the spec reader refuses (size, depth, aliases, keys, encoding)
 │    ├── SettingsError  a setting no service can use (names the flag or variable)
 │    ├── BuildError     a build that cannot be registered or found (`worker builds`)
 │    ├── ExportFileError  a campaign file `collector import` cannot read (names the field)
 │    └── CampaignExists   an import of a campaign id already stored, without --replace
 ├── BenchfleetRegression  the gate failed a spec's newest night against its last good one (exit 5)
 ├── DecodeError         a message body that is not a message we understand
 ├── ConnectError        a service we need is away or refused us (exit 3)
 │    ├── BusError       RabbitMQ
 │    │    └── TopologyMissing  a queue a worker needs is not declared yet
 │    └── StoreError     the results DB
 │         ├── StoreUnavailable  the results DB is away (not: it refused this write)
 │         ├── StoreRefused      the results DB refuses this write (the message is to blame)
 │         ├── SubmitLockBusy    another submit held the submit lock too long
 │         └── NotYourCampaign   another submitter's campaign, for a user without the operator role
 └── RunError            a run could not be measured (the run fails with the message)
      ├── TargetError    a target that cannot be used as given (names the spec field)
      │    └── BinaryNotFound  a managed target's server binary is not on this host
      │    (the worker's quiesce adds TargetUnsettled: a target still busy when it gave up)
      ├── LoadError      the load could not run (with the MySQL error code, if any)
      │    ├── ClientLibraryError  libmariadb cannot be loaded
      │    ├── FdLimitError        the hard RLIMIT_NOFILE is too low for the run
      │    └── SysbenchOutputError sysbench's output holds no final report
      └── DbError        one MySQL error of the native driver, with its code
"""

from __future__ import annotations

from dataclasses import dataclass

from services.common.terminal import escape_controls


class BenchfleetError(Exception):
    """Base of every error benchfleet raises on purpose; its text is fit for a user."""


# -- the user's input ---------------------------------------------------------------------------


class UsageError(BenchfleetError):
    """Input a user must fix (a CLI exits 2 with it)."""


@dataclass(frozen=True)
class FieldError:
    """One wrong field of a spec: its path (``targets[1].port``), why, and its YAML line."""

    path: str
    message: str
    line: int | None = None
    #: The name the user probably meant, when a name was misspelt (the message says it too).
    suggestion: str | None = None

    def render(self, source: str) -> str:
        where = f"{source}:{self.line}: " if self.line else f"{source}: "
        # One line per error, whatever the user's value held (it may be quoted in the message).
        message = "\\n".join(self.message.splitlines()) or self.message
        # A key is the spec's own text: a line break in it is shown (\x0a), never a second line.
        return f"{where}{escape_controls(self.path, keep='') or '(spec)'}: {message}"


class SpecError(UsageError):
    """A spec that cannot run; ``errors`` has one entry per wrong field."""

    def __init__(self, source: str, errors: list[FieldError]):
        self.source = source
        self.errors = errors
        super().__init__("\n".join(e.render(source) for e in errors))


class YamlProblem(UsageError):
    """YAML that is not acceptable: why, the field path when known, and the line (the spec
    reader turns it into a SpecError naming the file)."""

    def __init__(self, message: str, path: str = "", line: int | None = None):
        self.message = message
        self.path = path
        self.line = line
        super().__init__(message)


class SettingsError(UsageError, ValueError):
    """A setting with a value no service can use; the message names the flag or variable."""


# -- messages -----------------------------------------------------------------------------------


class BuildError(UsageError):
    """A build that cannot be registered, listed or removed as asked; names the flag or build."""


class ExportFileError(UsageError):
    """A campaign export (or sysbench output) that cannot be read in: not JSON, another schema,
    a wrong field; the message names the file and the field."""


class CampaignExists(UsageError):
    """An import names a campaign id the results DB already holds (``--replace`` replaces it)."""


class BenchfleetRegression(BenchfleetError):
    """The gate failed a spec's newest campaign against its last good one (`collector history SPEC
    --changes --fail-on-slower PCT`): what a nightly CI job stops on. The text names the campaigns."""

    def __init__(self, spec: str, newest: str, reference: str, cells: int):
        super().__init__(f"{spec}: campaign {newest} is slower than the last good campaign {reference} "
                         f"in {cells} cell(s)")
        self.spec, self.newest, self.reference, self.cells = spec, newest, reference, cells


class DecodeError(BenchfleetError):
    """A message body that is not a message we understand; ``field`` names what is wrong."""

    def __init__(self, field: str, message: str):
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}" if field else message)


# -- services we talk to ------------------------------------------------------------------------


class ConnectError(BenchfleetError):
    """A service benchfleet needs is away or refused it (a CLI exits 3 with it)."""


class BusError(ConnectError):
    """The broker cannot be reached or refused a publish; the message says which."""


class Unroutable(BusError):
    """A confirmed publish that no queue was bound to take (e.g. the results queue before any
    collector bound it); the message was not kept."""


class TopologyMissing(BusError):
    """A queue or exchange a worker or the scheduler uses is not declared yet (by the scheduler or collector)."""


class StoreError(ConnectError):
    """The results DB cannot be reached or used; the message says which and where."""

    def __init__(self, message: str, *, errno: int | None = None):
        super().__init__(message)
        #: The MySQL error number when the DB answered with an error (None: no answer, or none of its own).
        self.errno = errno


class StoreUnavailable(StoreError):
    """The results DB is away (connection lost, refused, no database): wait and retry, never
    blame the message being stored."""


class StoreRefused(StoreError):
    """The results DB refuses this write for a reason of the message's own (a run that was
    never planned, a cell that differs from the run's, a value the DB rejects, a result too big
    for its packet limit): trying again cannot help, so the message is dead-lettered."""


class SubmitLockBusy(StoreError):
    """Another submit held the submit lock in the results DB for too long: nothing was done."""


class NotYourCampaign(StoreError):
    """A campaign of another submitter, which only an operator may cancel: nothing was done."""


# -- runs ---------------------------------------------------------------------------------------

class RunError(BenchfleetError):
    """A run could not be measured; the run fails with this message."""

class TargetError(RunError):
    """A target that cannot be used as given; ``field`` names the spec field to fix."""

    def __init__(self, field: str, message: str):
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}")

class BinaryNotFound(TargetError):
    """A managed target's server binary (or its install script) is not on this host."""

    def __init__(self, message: str, field: str = "binary"):
        super().__init__(field, message)

    def __str__(self) -> str:
        return self.message


class LoadError(RunError):
    """The load could not run at all; ``code`` is the MySQL error code when there is one."""

    def __init__(self, message: str, code: int | None = None):
        self.message = message
        self.code = code
        super().__init__(message)

class ClientLibraryError(LoadError):
    """libmariadb cannot be loaded on this worker."""

class FdLimitError(LoadError):
    """The hard RLIMIT_NOFILE is below what the run needs."""

class SysbenchOutputError(LoadError):
    """sysbench's output holds no final report; ``fatal`` carries its FATAL lines, if any."""

    def __init__(self, message: str, fatal: list[str] | None = None):
        self.fatal = fatal or []
        super().__init__(message)

class DbError(RunError):
    """A MySQL error with its code (server error or CR_* client error)."""

    def __init__(self, code: int, message: str):
        self.errno = code
        self.msg = message
        super().__init__(f"{message} (error {code})")

class CpuSplitError(TargetError):
    """A CPU list that does not fit the worker; ``field`` is server_cpus or client_cpus."""
