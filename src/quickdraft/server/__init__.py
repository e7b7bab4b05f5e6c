"""OpenAI-compatible HTTP server (FastAPI + uvicorn): `quickdraft serve`, or `create_app(generator, ...)`.

    schemas.py  request bodies (pydantic, strict) and response objects, in OpenAI's shapes
    worker.py   the FIFO queue and the one thread that runs generations
    metrics.py  Prometheus text for GET /metrics
    guard.py    Host allow-list, JSON-only bodies, body size: what is refused before a route runs
    app.py      routes, errors, streaming; create_app
    http.py     uvicorn with header timeouts and a cap on open connections

See docs/server.md.
"""

from . import http
from .app import ServerLimits, create_app
from .guard import HostPolicy

__all__ = ["HostPolicy", "ServerLimits", "create_app", "http"]
