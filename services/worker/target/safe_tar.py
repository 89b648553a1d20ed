"""Extracting a build's tarball so that nothing lands outside its tree, on every Python the project
supports: ``tarfile``'s ``filter="data"`` exists only from 3.11.4, and Debian 12 ships 3.11.2."""

from __future__ import annotations

import copy
import os
import tarfile
from pathlib import Path

#: Permission bits a registered build keeps: setuid, setgid and sticky bits are dropped, as the
#: "data" filter does, so a tarball cannot plant a set-id binary for the worker to start.
_KEEP_MODE = 0o777


class UnsafeMember(tarfile.TarError):
    """A member that would leave the tree or is not plain data; its text names the member."""


def _inside(root: Path, path: Path) -> bool:
    return path == root or root in path.parents


def _checked(root: Path, m: tarfile.TarInfo) -> tarfile.TarInfo:
    """``m`` as it may be extracted under ``root``, or UnsafeMember naming why not."""
    if not (m.isreg() or m.isdir() or m.issym() or m.islnk()):
        raise UnsafeMember(f"{m.name!r} is not a file, directory or link")
    if os.path.isabs(m.name) or ".." in Path(m.name).parts:
        raise UnsafeMember(f"{m.name!r} points outside the tree")
    dest = Path(os.path.normpath(root / m.name))
    if not _inside(root, dest):
        raise UnsafeMember(f"{m.name!r} points outside the tree")
    if m.issym():
        target = Path(os.path.normpath(dest.parent / m.linkname))
        if os.path.isabs(m.linkname) or not _inside(root, target):
            raise UnsafeMember(f"{m.name!r} links to {m.linkname!r}, outside the tree")
    if m.islnk():
        target = Path(os.path.normpath(root / m.linkname))
        if os.path.isabs(m.linkname) or not _inside(root, target):
            raise UnsafeMember(f"{m.name!r} links to {m.linkname!r}, outside the tree")
    m = copy.copy(m)  # TarInfo.replace exists only from 3.11.4
    m.uid = m.gid = 0
    m.uname = m.gname = ""
    m.mode &= _KEEP_MODE
    return m


def extract(tarball: Path, tree: Path) -> None:
    """Extract ``tarball`` into ``tree``; UnsafeMember (nothing written) if any member would leave it."""
    root = Path(os.path.realpath(tree))
    with tarfile.open(tarball) as tf:
        members = [_checked(root, m) for m in tf.getmembers()]
        # Links are made last: an earlier symlink cannot then redirect a later file out of the tree.
        members.sort(key=lambda m: m.issym() or m.islnk())
        # Where tarfile has its own "data" filter (3.11.4 on), it checks each member again.
        extra = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
        for m in members:
            tf.extract(m, root, set_attrs=not m.issym(), numeric_owner=True, **extra)
