"""OpenAI-compatible HTTP server (FastAPI + uvicorn): `quickdraft serve`, or `create_app(generator, ...)`.

    schemas.py  request bodies (pydantic, strict) and response objects, in OpenAI's shapes
    worker.py   the FIFO queue and the one thread that runs generations
    metrics.py  Prometheus text for GET /metrics
    app.py      routes, errors, streaming; create_app

See docs/server.md.
"""

from .app import ServerLimits, create_app

__all__ = ["ServerLimits", "create_app"]
