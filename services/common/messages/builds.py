"""Server builds: the records a worker's build registry keeps and announces.

A build is a server tree the worker's operator installed (`worker builds add`): Debian packages
at an exact version, a binary tarball, or a directory the operator compiled. A managed target
names a build; the spec never names a path. Pure: the registry on disk lives in
services/worker/target/builds.py, the announcement's travel in services/common/messages/.

Record history (``schema``):
  benchfleet.build/1   name, source, origin, basedir, binary, version, server_sha256, added_at
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from services.common.messages.base import Record
from services.common.spec.fields import NAME_PATTERN

BUILD_SCHEMA = "benchfleet.build/1"
#: The default build of a managed target that names none: the worker's system server.
SYSTEM_BUILD = "system"

BuildName = Annotated[str, Field(pattern=NAME_PATTERN)]
Sha256 = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
#: How a registered build was installed: debian (apt-get download + dpkg -x), tarball, or dir (in place).
BuildSource = Literal["debian", "tarball", "dir"]


class BuildRecord(Record):
    """One registered build, as the registry stores it in ``<registry>/<name>/build.json``."""

    schema_: Literal["benchfleet.build/1"] = Field(BUILD_SCHEMA, alias="schema")
    name: BuildName
    source: BuildSource
    #: What it was installed from: the packages at their exact version, a tarball's file name,
    #: or the registered directory.
    origin: str
    #: The installation directory (its bin/ or sbin/ holds the server, bin/ or scripts/ the
    #: install script, share/ the server's messages and SQL).
    basedir: str
    #: The server binary (under basedir).
    binary: str
    #: What `mariadbd --version` printed, e.g. "10.11.18-MariaDB-0+deb12u1".
    version: str
    #: sha256 of the server binary when the build was registered.
    server_sha256: Sha256
    added_at: float

    def encode(self) -> str:
        return self.model_dump_json(by_alias=True, indent=1) + "\n"

    def info(self) -> "BuildInfo":
        return BuildInfo(name=self.name, version=self.version, server_sha256=self.server_sha256, source=self.source)


class BuildInfo(Record):
    """What a worker announces of one build: enough to check a spec and describe a result."""

    name: BuildName
    version: str
    server_sha256: Sha256
    #: A registered build's source, or "system" for the worker's own server (SYSTEM_BUILD).
    source: BuildSource | Literal["system"]
