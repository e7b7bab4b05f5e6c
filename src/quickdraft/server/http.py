"""uvicorn, configured so that slow or greedy clients cannot hold the server.

uvicorn's HTTP/1.1 protocol has a keep-alive timeout, but none for a request whose headers never
finish (its keep-alive timer stops at the first byte), and it caps concurrency only once a request
has arrived. GuardedH11 adds both at the connection:

    headers      a request's headers must be complete within header_timeout seconds of the connection
                 opening (or of the previous response, on a kept-alive connection); else it is closed
    connections  past max_connections open connections, a new one is answered 503 and closed

A body that trickles in is bounded by the app (ServerLimits.body_timeout, answered 408).

`serve` runs uvicorn on a thread of its own and the generation worker on the calling (main) thread:
decoding on the thread that loaded the model is as fast as the library's (docs/server.md#speed).
"""

from __future__ import annotations

import asyncio
import json
import signal
import threading
from typing import Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from .app import ServerLimits
from .schemas import error_body
from .worker import Worker

_BUSY = json.dumps(error_body("The server has too many open connections; retry in a few seconds.", "server_busy",
                              code="too_many_connections")).encode()
BUSY_RESPONSE = (b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nretry-after: 1\r\n"
                 b"connection: close\r\ncontent-length: " + str(len(_BUSY)).encode() + b"\r\n\r\n" + _BUSY)


class GuardedH11(H11Protocol):
    """uvicorn's h11 protocol with a header timeout and a cap on open connections (class attributes, set by
    `protocol(limits)`)."""

    header_timeout: float = 10.0
    max_connections: int = 256

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        over = len(self.connections) >= self.max_connections
        super().connection_made(transport)
        self._header_timer: asyncio.TimerHandle | None = None
        if over:
            transport.write(BUSY_RESPONSE)
            transport.close()
            return
        self._arm()

    def _arm(self) -> None:
        self._disarm()
        self._header_timer = self.loop.call_later(self.header_timeout, self._headers_too_slow)

    def _disarm(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _headers_too_slow(self) -> None:
        self._header_timer = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self.transport.close()  # no request began: nothing to answer

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE:  # the headers are in
            self._disarm()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and self.conn.their_state is h11.IDLE:
            self._arm()  # the next request's headers, on a kept-alive connection

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)


def protocol(limits: ServerLimits) -> type[GuardedH11]:
    return type("GuardedH11", (GuardedH11,), {"header_timeout": limits.header_timeout,
                                               "max_connections": limits.max_connections})


def config(app: Any, limits: ServerLimits, **options: Any) -> uvicorn.Config:
    """uvicorn's Config for `app` under `limits`; options (host, port, log_level, ...) as uvicorn takes them."""
    return uvicorn.Config(app, http=protocol(limits), timeout_keep_alive=limits.keep_alive_timeout, **options)


def serve(server: uvicorn.Server, worker: Worker) -> None:
    """Run `server` (its app's generations go to `worker`) until it stops or SIGINT/SIGTERM: uvicorn on a
    thread, the worker's loop here, on the main thread."""
    thread = threading.Thread(target=server.run, name="quickdraft-http", daemon=True)

    def stop(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, stop)
    worker.on_caller()  # before the app's startup, which would start a thread
    thread.start()
    try:
        worker.run_here(lambda: not thread.is_alive())
    except KeyboardInterrupt:
        pass
    finally:
        server.should_exit = True
        worker.stop()
        thread.join(10)
        signal.signal(signal.SIGTERM, previous)
