"""An executor of one daemon thread: a question to the broker that hangs (up to its HTTP timeouts)
does not hold the collector's exit, as a ThreadPoolExecutor's thread does (the interpreter joins
those at exit)."""

from __future__ import annotations

import queue
import threading
from concurrent.futures import Executor, Future
from typing import Any, Callable


class DaemonAsker(Executor):
    """Runs what is submitted one at a time, in order, on a daemon thread started at the first submit."""

    def __init__(self, name: str):
        self.name = name
        self._work: queue.SimpleQueue[tuple[Future[Any], Callable[..., Any], tuple[Any, ...], dict[str, Any]] | None] = \
            queue.SimpleQueue()
        self._lock = threading.Lock()
        self._shut = False
        self._thread: threading.Thread | None = None

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        with self._lock:
            if self._shut:
                raise RuntimeError("cannot schedule new futures after shutdown")
            if self._thread is None:
                self._thread = threading.Thread(target=self._serve, name=self.name, daemon=True)
                self._thread.start()
            f: Future[Any] = Future()
            self._work.put((f, fn, args, kwargs))
            return f

    def _serve(self) -> None:
        while (item := self._work.get()) is not None:
            f, fn, args, kwargs = item
            if not f.set_running_or_notify_cancel():
                continue
            try:
                f.set_result(fn(*args, **kwargs))
            except BaseException as e:  # the caller reads it from the future
                f.set_exception(e)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._lock:
            self._shut = True
            thread = self._thread
        if cancel_futures:
            while True:
                try:
                    item = self._work.get_nowait()
                except queue.Empty:
                    break
                if item is not None:
                    item[0].cancel()
        self._work.put(None)
        if wait and thread is not None:
            thread.join()
