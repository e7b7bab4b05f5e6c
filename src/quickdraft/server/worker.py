"""One model, many clients: a FIFO queue in front of one worker thread that runs generations one at a time.

The event loop never runs the model. A request's validated Stream becomes a Job; the worker thread
iterates it and hands every event to the request's event loop through `deliver` (which must be safe
to call from another thread). Between engine steps the worker looks at the job's `cancelled` flag
and its deadline, so a client that goes away or runs out of time frees the model after at most one
more step. Stopping the iteration early is all the cleanup there is: the next generation resets the
runner before it starts.

Events delivered, in order: ("chunk", Chunk) per engine step, then exactly one of ("done", Result),
("timeout", None) or ("error", Exception). A cancelled job gets no closing event: nobody is listening.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable

from ..api import Stream

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

    @property
    def queued(self) -> int:
        return len(self._waiting)

    def start(self) -> None:
        with self._cond:
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="quickdraft-worker", daemon=True)
                self._thread.start()

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
        self.start()

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

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._waiting and not self._closed:
                    self._cond.wait()
                if self._closed:
                    return
                job = self._waiting.popleft()
                self.running = job
            try:
                outcome = self._run(job)
            finally:
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
                if stop := _should_stop(job):
                    return stop
            job.deliver("done", job.stream.result)
            return "done"
        except Exception as e:  # the server stays up; the client gets a server_error
            log.exception("generation failed")
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
