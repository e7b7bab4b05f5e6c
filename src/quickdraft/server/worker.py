"""One model, many clients: a FIFO queue in front of one worker thread that runs generations one at a time.

The event loop never runs the model. A request's validated Stream becomes a Job; the worker thread
iterates it and hands every event to the request's event loop through `deliver` (which must be safe
to call from another thread). Between engine steps the worker looks at the job's `cancelled` flag
and its deadline, so a client that goes away or runs out of time frees the model after at most one
more step. Stopping the iteration early is all the cleanup there is: the next generation resets the
runner before it starts.

Events delivered, in order: ("chunk", Chunk) per engine step, then exactly one of ("done", Result),
("timeout", None) or ("error", Exception). A cancelled job gets no closing event: nobody is listening.

The worker is supervised: an exception out of a generation fails that job and the thread goes on;
anything that ends the thread itself (a BaseException such as SystemExit, or an exception raised into
it) fails the running job, and a new thread takes the queue (`restarts` counts them; ensure_running,
called on every submit and by /health, restarts a thread that died without a word).

`quickdraft serve` runs the loop on the main thread instead (`run_here`, with uvicorn on another
thread): torch decodes markedly slower on a thread other than the one that loaded the model
(measured: docs/server.md#speed), and there the same supervision restarts the loop in place.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable

from ..api import Stream
from .errors import request_id

log = logging.getLogger("quickdraft.server")


class QueueFull(Exception):
    """max_queue requests are already waiting behind the running one."""


@dataclass(eq=False)
class Job:
    stream: Stream
    deliver: Callable[[str, Any], None]  # called on the worker thread
    deadline: float  # time.monotonic() after which the job is abandoned
    submitted: float = field(default_factory=time.monotonic)
    started: float | None = None  # when the worker took it
    first_chunk: float | None = None  # when the first step's tokens were delivered
    finished: float | None = None
    cancelled: threading.Event = field(default_factory=threading.Event)
    id: str = field(default_factory=request_id)  # names it in the log and errors


class Worker:
    """Runs Jobs one at a time, in submission order, on one thread."""

    def __init__(self, max_queue: int, on_finish: Callable[[Job, str], None] | None = None):
        self.max_queue = max_queue
        self.on_finish = on_finish  # (job, outcome: "done" | "cancelled" | "timeout" | "error")
        self._waiting: deque[Job] = deque()
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closed = False
        self.running: Job | None = None
        self.restarts = 0  # worker threads (or loops, under run_here) started again after one died
        self._here = False  # the loop runs on a caller's thread (run_here): no thread of its own

    @property
    def queued(self) -> int:
        return len(self._waiting)

    @property
    def full(self) -> bool:
        return len(self._waiting) >= self.max_queue

    def start(self) -> None:
        with self._cond:
            if self._thread is None and not self._closed and not self._here:
                self._thread = threading.Thread(target=self._supervised, name="quickdraft-worker", daemon=True)
                self._thread.start()

    def ensure_running(self) -> None:
        """Start a new worker thread if the last one died (and the worker is not stopped)."""
        with self._cond:
            dead = self._thread is not None and not self._thread.is_alive()
            if dead:
                log.error("the worker thread had died; starting a new one")
                self._thread = None
                self.restarts += 1
        self.start()

    def stop(self, timeout: float = 5.0) -> None:
        with self._cond:
            self._closed = True
            for job in self._waiting:
                job.cancelled.set()
            self._waiting.clear()
            if self.running is not None:
                self.running.cancelled.set()
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout)

    def submit(self, job: Job) -> None:
        with self._cond:
            if self._closed:
                raise RuntimeError("the worker is stopped")
            if len(self._waiting) >= self.max_queue:
                raise QueueFull
            self._waiting.append(job)
            self._cond.notify()
        self.ensure_running()

    def cancel(self, job: Job, outcome: str = "cancelled") -> None:
        """Stop a job: dropped from the queue if still waiting (reported to on_finish with `outcome`),
        stopped after the current step if running."""
        job.cancelled.set()
        with self._cond:
            try:
                self._waiting.remove(job)
            except ValueError:
                return
        job.finished = time.monotonic()
        if self.on_finish is not None:
            self.on_finish(job, outcome)

    def on_caller(self) -> None:
        """The loop will run on a caller's thread (run_here): start() and ensure_running() start no thread."""
        self._here = True

    def run_here(self, until: Callable[[], bool]) -> None:
        """Run the loop on this thread until the worker is stopped or `until()` is true (checked twice a
        second while idle). A failure that is not a generation's own fails the running job and the loop
        goes on; KeyboardInterrupt ends it."""
        self.on_caller()
        while not self._closed and not until():
            try:
                self._loop(until)
            except KeyboardInterrupt:
                raise
            except BaseException as e:  # noqa: BLE001 - as _supervised, in place
                self._failed(e)

    def _failed(self, e: BaseException) -> None:
        """The loop died with `e` outside a generation's own handling: fail the running job, count a restart."""
        log.critical("the worker loop died (%s); restarting it", type(e).__name__, exc_info=e)
        with self._cond:
            job, self.running = self.running, None
            self.restarts += 1
        if job is not None:
            job.finished = time.monotonic()
            try:
                job.deliver("error", e)
                if self.on_finish is not None:
                    self.on_finish(job, "error")
            except Exception:
                log.exception("could not report job %s", job.id)

    def _supervised(self) -> None:
        """The thread's body: the loop, and if something ends the thread itself, the running job failed and a
        new thread started in its place."""
        try:
            self._loop()
        except BaseException as e:  # not a generation's own failure (those end in _run): the thread is dying
            with self._cond:
                self._thread = None
            self._failed(e)
            self.start()

    def _loop(self, until: Callable[[], bool] | None = None) -> None:
        while True:
            with self._cond:
                while not self._waiting and not self._closed:
                    if until is not None and until():
                        return
                    self._cond.wait(None if until is None else 0.5)
                if self._closed:
                    return
                job = self._waiting.popleft()
                self.running = job
            outcome = self._run(job)  # what ends the thread leaves self.running set, for _supervised
            job.finished = time.monotonic()
            with self._cond:
                self.running = None
            if self.on_finish is not None:
                try:
                    self.on_finish(job, outcome)
                except Exception:  # metrics must never take the worker down
                    log.exception("on_finish failed")

    def _run(self, job: Job) -> str:
        job.started = time.monotonic()
        if stop := _should_stop(job):
            return stop
        steps = iter(job.stream)
        try:
            for chunk in steps:  # one engine step per chunk
                if job.first_chunk is None and chunk.token_ids:
                    job.first_chunk = time.monotonic()
                job.deliver("chunk", chunk)
                if chunk.finish_reason is None and (stop := _should_stop(job)):  # a finished answer is not late
                    return stop
            job.deliver("done", job.stream.result)
            return "done"
        except Exception as e:  # the server stays up; the client gets a server_error
            log.exception("generation of request %s failed", job.id)
            job.deliver("error", e)
            return "error"
        finally:
            steps.close()  # stop between steps; the next generation resets the runner


def _should_stop(job: Job) -> str | None:
    """"timeout" (and tell the client) once past the deadline, "cancelled" once cancelled, else None."""
    if time.monotonic() > job.deadline:
        job.deliver("timeout", None)
        return "timeout"
    return "cancelled" if job.cancelled.is_set() else None
