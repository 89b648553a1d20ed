"""Starting a load process: a fresh interpreter that runs child.py, joined to the parent by a
socket pair with a multiprocessing Connection at each end.

Not multiprocessing's spawn, for memory: spawn starts a resource tracker beside the first load
process (one more interpreter, about 13 MiB, kept for the worker's life) and makes every load
process import its parent's main script again, which for a worker is the whole CLI."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from multiprocessing.connection import Connection

from services.worker.driver.native.protocol import Job

#: glibc's malloc gives blocks above its mmap threshold (128 KiB at first, raised as large blocks
#: are freed) a mapping each. Each connection's coroutine stack (libmariadb's non-blocking calls,
#: 256 KiB) is such a block: a mapping of its own wastes a page per connection on the block's
#: header (16 MiB at 4096 connections), and whether it gets one depended on what the process had
#: freed before. A fixed threshold above it keeps the stacks in malloc's heaps, side by side.
MALLOC_SETTINGS = {"MALLOC_MMAP_THRESHOLD_": str(1 << 20)}


#: The flags of ``sys.flags`` that change where a child finds and how it runs the same code.
_FLAGS = (("isolated", "-I"), ("ignore_environment", "-E"), ("no_user_site", "-s"), ("no_site", "-S"),
          ("dont_write_bytecode", "-B"), ("safe_path", "-P"))


def interpreter_flags() -> list[str]:
    """This interpreter's own flags, so a load process imports what its worker imported."""
    flags = [opt for name, opt in _FLAGS if getattr(sys.flags, name, 0)]
    return flags + ["-O"] * sys.flags.optimize


class LoadProcess:
    """One running load process and the parent's end of its pipe."""

    def __init__(self, job: Job):
        mine, theirs = socket.socketpair()
        try:
            fd = theirs.fileno()
            argv = [sys.executable, *interpreter_flags(), "-m", __name__, str(fd)]
            self.popen = subprocess.Popen(argv, pass_fds=(fd,), stdin=subprocess.DEVNULL,
                                          env={**os.environ, **MALLOC_SETTINGS})
        except BaseException:
            mine.close()
            raise
        finally:
            theirs.close()
        self.pipe = Connection(mine.detach())
        try:
            self.pipe.send(job)
        except BaseException:
            self.end(0.0)
            raise

    @property
    def exitcode(self) -> int | None:
        """The exit code once it ended (negative: killed by that signal), else None."""
        return self.popen.poll()

    def end(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for it to exit, then kill it; close the pipe."""
        try:
            self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait()
        self.pipe.close()


def _main() -> None:
    from services.worker.driver.native import child

    pipe = Connection(int(sys.argv[1]))
    try:
        job = pipe.recv()
    except (EOFError, OSError):
        return  # the parent is gone before it sent the job
    child.main(pipe, job)


if __name__ == "__main__":
    _main()
