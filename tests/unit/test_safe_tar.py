"""A build's tarball is extracted with nothing outside its tree, on Debian 12's Python 3.11.2 too
(where tarfile has no ``filter`` argument)."""

from __future__ import annotations

import io
import stat
import tarfile
from pathlib import Path

import pytest

from services.common.errors import BuildError
from services.worker.target import builds as reg
from services.worker.target import safe_tar


def _tarball(path: Path, members: list[tuple[tarfile.TarInfo, bytes | None]]) -> Path:
    with tarfile.open(path, "w") as tf:
        for info, data in members:
            tf.addfile(info, io.BytesIO(data) if data is not None else None)
    return path


def _file(name: str, data: bytes = b"x", mode: int = 0o644) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.size, info.mode = len(data), mode
    return info, data


def _link(name: str, target: str, kind: bytes = tarfile.SYMTYPE) -> tuple[tarfile.TarInfo, None]:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, target
    return info, None


@pytest.mark.parametrize("member, why", [
    (_file("../escaped"), "points outside the tree"),
    (_file("/etc/escaped"), "points outside the tree"),
    (_link("bin/evil", "/etc/passwd"), "outside the tree"),
    (_link("bin/evil", "../../etc/passwd"), "outside the tree"),
    (_link("bin/evil", "../../../outside", tarfile.LNKTYPE), "outside the tree"),
])
def test_a_member_leaving_the_tree_writes_nothing(tmp_path, member, why):
    """Absolute paths, `..` and links pointing out of the tree refuse the whole tarball, naming the member."""
    tarball = _tarball(tmp_path / "t.tar", [_file("bin/ok"), member])
    tree = tmp_path / "tree"
    tree.mkdir()
    with pytest.raises(safe_tar.UnsafeMember, match=why):
        safe_tar.extract(tarball, tree)
    assert list(tree.iterdir()) == []
    assert not (tmp_path / "escaped").exists()


def test_device_files_are_refused(tmp_path):
    """A character device in a build's tarball is not data: refused."""
    info = tarfile.TarInfo("dev/null")
    info.type = tarfile.CHRTYPE
    tarball = _tarball(tmp_path / "t.tar", [(info, None)])
    (tmp_path / "tree").mkdir()
    with pytest.raises(safe_tar.UnsafeMember, match="not a file, directory or link"):
        safe_tar.extract(tarball, tmp_path / "tree")


def test_set_id_bits_are_dropped_and_links_inside_kept(tmp_path):
    """A setuid binary loses the bit; a relative symlink that stays inside the tree is kept."""
    tarball = _tarball(tmp_path / "t.tar", [_file("sbin/mariadbd", b"#!/bin/sh\n", 0o4755),
                                            _link("bin/mysqld", "../sbin/mariadbd")])
    tree = tmp_path / "tree"
    tree.mkdir()
    safe_tar.extract(tarball, tree)
    mode = (tree / "sbin" / "mariadbd").stat().st_mode
    assert not mode & stat.S_ISUID and mode & 0o755 == 0o755
    assert (tree / "bin" / "mysqld").resolve() == (tree / "sbin" / "mariadbd").resolve()


def test_the_registry_refuses_a_hostile_tarball_with_a_build_error(tmp_path):
    """`worker builds add --tarball` says which member was refused and registers nothing."""
    tarball = _tarball(tmp_path / "t.tar", [_file("../../escaped")])
    r = reg.Registry(tmp_path / "builds")
    with pytest.raises(BuildError, match="points outside the tree"):
        r.add_tarball("tb", tarball)
    assert not (tmp_path / "builds" / "tb").exists()
