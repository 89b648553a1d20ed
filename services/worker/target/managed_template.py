"""The build a managed target runs, and its template: a datadir initialised once per build (and
on-disk options) with a client account, copied for each target; and the user servers run as."""

from __future__ import annotations

import fcntl
import hashlib
import os
import pwd
import secrets
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from services.common import logs
from services.common.spec import server_binary
from services.common.spec import server_options
from services.common.messages.builds import SYSTEM_BUILD
from services.common.errors import BuildError
from services.common.spec.targets import ManagedTarget
from services.worker.target import builds as build_registry
from services.worker.target import flavours
from services.worker.target.dsn import TargetError
from services.worker.target.server_env import server_environment

log = logs.get(__name__)

#: The unix user a server runs as when the worker is root (mariadbd refuses to run as root): a
#: user of its own that owns nothing but the scratch datadirs, not `mysql`, which owns the
#: system server's datadir. deploy/ensure-services worker creates it.
SERVER_USER = "benchfleet-mysqld"
#: How to create SERVER_USER by hand (said when it is missing).
SERVER_USER_HINT = (f"create it with deploy/ensure-services worker, or: useradd --system --user-group "
                    f"--no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin {SERVER_USER}")
#: The account the load processes use on a managed server (created in the template).
CLIENT_USER = "benchfleet"
#: Lines of the server's error log quoted in a failed run's error message.
LOG_TAIL_LINES = 25
#: Seconds the template's mariadb-install-db may take.
INSTALL_TIMEOUT_S = 300.0
#: Options that fix the on-disk format: a template is initialised with them, so targets that
#: set them get a template of their own (other options only matter at start-up).
INIT_OPTIONS = frozenset({"innodb_page_size", "lower_case_table_names", "innodb_data_file_path",
                          "innodb_undo_tablespaces", "innodb_checksum_algorithm", "aria_block_size"})
#: Part of a template's key: a change to what a template holds (2: the client account without
#: FILE) makes new templates instead of reusing older ones.
TEMPLATE_VERSION = 2


def server_ids() -> tuple[int, int] | None:
    """(uid, gid) to run servers as: SERVER_USER when root, else None (run as ourselves)."""
    if os.geteuid() != 0:
        return None
    try:
        pw = pwd.getpwnam(SERVER_USER)
    except KeyError:
        raise TargetError("kind", f"the worker runs as root and there is no {SERVER_USER!r} user to run "
                                  f"mariadbd as (mariadbd refuses to run as root); {SERVER_USER_HINT}") from None
    return pw.pw_uid, pw.pw_gid


def chown_tree(path: Path, ids: tuple[int, int] | None) -> None:
    if ids is None:
        return
    for root, dirs, files in os.walk(path):
        os.chown(root, *ids)
        for n in dirs + files:
            os.lchown(os.path.join(root, n), *ids)


def log_tail(path: Path, offset: int = 0, lines: int = LOG_TAIL_LINES) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            text = f.read().decode(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.strip().splitlines()[-lines:])


def short_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:10]


@dataclass(frozen=True)
class ServerBuild:
    """The build a managed target runs, as found on this worker."""

    name: str
    binary: Path
    #: The registered build's directory; None for the system server.
    basedir: str | None
    version: str
    server_sha256: str


def ensure_template(base: Path, target: ManagedTarget, build: ServerBuild, ids: tuple[int, int] | None) -> Path:
    """The initialised template of ``build``, made once (under a lock, so workers sharing a
    host build it once) and kept across workers."""
    binary = build.binary
    st = binary.stat()
    init = _init_args(target)
    key = short_hash(f"{TEMPLATE_VERSION}:{binary.resolve()}:{st.st_size}:{st.st_mtime}:{build.basedir or ''}:"
                     f"{' '.join(init)}")
    tdir = base / "templates" / key
    if (tdir / "ready").exists():
        return tdir
    (base / "templates").mkdir(parents=True, exist_ok=True)
    with open(base / "templates" / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (tdir / "ready").exists():
            return tdir
        work = base / "templates" / f"{key}.tmp-{os.getpid()}"
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(mode=0o755)
        chown_tree(work, ids)
        started = time.monotonic()
        _install(target, build, work, ids)
        (work / "binary").write_text(f"{binary}\n")
        if tdir.exists():
            shutil.rmtree(tdir)
        os.rename(work, tdir)
        (tdir / "ready").write_text(f"{time.time()}\n")
        log.info("managed_template_ready", binary=str(binary), template=str(tdir),
                 seconds=round(time.monotonic() - started, 2))
    return tdir


def _init_args(target: ManagedTarget) -> list[str]:
    return server_options.argv({k: v for k, v in server_options.canonical(target.options).items()
                                if k in INIT_OPTIONS})


def _install(target: ManagedTarget, build: ServerBuild, work: Path, ids: tuple[int, int] | None) -> None:
    """Initialise ``work``/data with the build's flavour of initialisation and a client account."""
    flavour = flavours.flavour_of(build.version)
    script = None if flavour.initialize_in_server else server_binary.install_script(build.binary, build.basedir)
    # A password-protected client account for the load processes.
    password = secrets.token_urlsafe(18)
    pw_file = work / "client_password"
    pw_file.touch(mode=0o600)
    pw_file.write_text(password)
    sql = flavours.client_user_sql(flavour, CLIENT_USER, password, ("localhost", "127.0.0.1"))
    sql_file = work / "client.sql"
    sql_file.touch(mode=0o600)
    sql_file.write_text(sql)
    if ids is not None:
        os.chown(sql_file, *ids)  # MySQL's server reads it as the server's user
    commands = flavours.init_commands(flavour, binary=build.binary, script=script, datadir=work / "data",
                                      basedir=build.basedir, user=SERVER_USER if ids is not None else None,
                                      init_args=_init_args(target), sql_file=sql_file, error_log=work / "bootstrap.err")
    # Temporary tables of the install go to a folder of its own, not /tmp: their files are named by
    # the server's pid, and one a killed server left there under a pid now reused fails the install.
    tmp = work / "tmp"
    tmp.mkdir(mode=0o700)
    chown_tree(tmp, ids)
    env = {**server_environment(), "TMPDIR": str(tmp)}
    try:
        for i, argv in enumerate(commands):
            last = i == len(commands) - 1
            # MariaDB's bootstrap (the last of its two commands) reads the SQL on stdin.
            stdin = sql if last and not flavour.initialize_in_server else None
            p = subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S,
                               stdin=None if stdin is not None else subprocess.DEVNULL, env=env)
            if p.returncode != 0:
                tail = log_tail(work / "bootstrap.err") if last else ""
                what = "creating the client user" if stdin is not None else argv[0]
                raise TargetError(f"targets.{target.name}.build", f"{what} failed (exit {p.returncode}): "
                                  f"{tail or (p.stdout + p.stderr).strip()[-1500:]}")
    finally:
        sql_file.unlink(missing_ok=True)  # it holds the password
        shutil.rmtree(tmp, ignore_errors=True)


def find_build(target: ManagedTarget, registry: "build_registry.Registry | None") -> ServerBuild:
    """The build ``target`` names, as registered on this worker (the system server when it names
    none); TargetError naming targets.NAME.build before anything starts."""
    where = f"targets.{target.name}.build"
    if target.build in (None, SYSTEM_BUILD):
        try:
            binary = server_binary.system_binary()
            return ServerBuild(SYSTEM_BUILD, binary, None, build_registry.server_version(binary),
                               build_registry.sha256_of(binary))
        except (server_binary.BinaryNotFound, BuildError, OSError) as e:
            raise TargetError(where, str(e)) from None
    try:
        record = (registry or build_registry.Registry()).get(target.build)
        binary = Path(record.binary)
        sha = build_registry.sha256_of(binary)
        return ServerBuild(record.name, binary, record.basedir, build_registry.current_version(record, sha), sha)
    except (BuildError, OSError) as e:
        raise TargetError(where, str(e)) from None
