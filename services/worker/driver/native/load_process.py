"""Starting a load process: a fresh interpreter that runs child.py, joined to the parent by a
socket pair with a multiprocessing Connection at each end.

Not multiprocessing's spawn, for memory: spawn starts a resource tracker beside the first load
process (one more interpreter, about 13 MiB, kept for the worker's life) and makes every load
process import its parent's main script again, which for a worker is the whole CLI."""

from __future__ import annotations

import socket
import subprocess
import sys
from multiprocessing.connection import Connection

from services.worker.driver.native.protocol import Job


class LoadProcess:
    """One running load process and the parent's end of its pipe."""

    def __init__(self, job: Job):
        mine, theirs = socket.socketpair()
        try:
            fd = theirs.fileno()
            # The interpreter's own flags (-B, -E, ...) as multiprocessing passes them on.
            argv = [sys.executable, *subprocess._args_from_interpreter_flags(),
                    "-m", __name__, str(fd)]
            self.popen = subprocess.Popen(argv, pass_fds=(fd,), stdin=subprocess.DEVNULL)
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
