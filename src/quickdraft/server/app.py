"""The OpenAI-compatible HTTP server: routes, error objects, streaming, and the bridge to the worker.

    POST /v1/chat/completions   POST /v1/completions   GET /v1/models[/{id}]   GET /metrics   GET /health

A request goes: Host, Content-Type and Content-Length (guard.py) -> bearer key (when one is set) ->
body (size limit, read timeout, JSON, schema) -> model name -> unsupported parameters -> the queue's
room (full: 429) -> text sizes against the context (cheap, before tokenising) -> one
`Generator.stream(...)` call, which validates everything else (prompt over the context, drafter and
prediction) before any model work -> max_tokens against what the context leaves -> the worker's
queue -> events from the worker thread, as one JSON response or as server-sent events ending in
`data: [DONE]`. Every failure is an OpenAI error object {"error": {message, type, param, code}}; a
server error says only its request id, and the log has the details under that id.

Nothing here runs the model or tokenises on the event loop: schema validation and request
preparation run on a small pool of threads (a big request does not hold up a small one behind it),
generation on the worker thread, so /health answers while a generation runs. docs/server.md lists
every limit and its flag.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import hashlib
import json
import re
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from importlib import resources
from typing import Any, AsyncIterator, Callable

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response, StreamingResponse
from pydantic import ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect

from ..api import Generator, Stream
from ..errors import ContextLengthError, QuickdraftError
from .errors import ApiError, bearer_check, http_error, server_error, validation_error
from .guard import Guard, HostPolicy, cors
from .metrics import CountResponses, Metrics
from .schemas import (COMPLETIONS_DEFAULT_MAX_TOKENS, BaseRequest, ChatCompletionRequest, CompletionRequest,
                      ResponseIds, UnsupportedParameter, decode_options, prediction_text, refuse_unsupported)
from .worker import Job, QueueFull, Worker

ROUTES = ("/v1/chat/completions", "/v1/completions", "/v1/models", "/metrics", "/health")
PROMETHEUS_TEXT = "text/plain; version=0.0.4; charset=utf-8"
DRAIN_LIMIT = 64 << 20  # an oversized body is read (and dropped) up to this much, so the client sees the 413
CLIENT_GONE = 499  # nginx's "client closed request": recorded in the metrics, never seen by anyone
CHARS_PER_TOKEN = 16  # a text longer than the context times this cannot fit it: refused before tokenising
PREPARE_THREADS = 4  # request validation and tokenising, off the event loop and not one behind another


@dataclass(frozen=True)
class ServerLimits:
    """What one client may take; every field has a `quickdraft serve` flag of the same name (docs/server.md)."""

    max_queue: int = 64  # requests waiting behind the running one; one more gets 429 + Retry-After
    request_timeout: float = 600.0  # seconds from arrival to the last token, queue wait included
    max_body_bytes: int = 8 << 20  # larger request bodies get 413
    header_timeout: float = 10.0  # seconds for a request's headers to arrive, else the connection closes
    body_timeout: float = 30.0  # seconds for a request's body to arrive, else 408
    keep_alive_timeout: float = 5.0  # an idle kept-alive connection closes after this many seconds
    max_connections: int = 256  # open connections; a new one past this gets 503 and is closed

    def __post_init__(self) -> None:
        for name in ("max_queue", "max_connections"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise QuickdraftError(f"{name} must be an integer >= 1; got {value!r}")
        for name in ("request_timeout", "header_timeout", "body_timeout", "keep_alive_timeout"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < float("inf"):
                raise QuickdraftError(f"{name} must be a number of seconds > 0; got {value!r}")
        if isinstance(self.max_body_bytes, bool) or not isinstance(self.max_body_bytes, int) \
                or self.max_body_bytes < 1024:
            raise QuickdraftError(f"max_body_bytes must be an integer >= 1024; got {self.max_body_bytes!r}")


def create_app(generator: Generator, *, model_name: str, api_key: str | None = None,
               limits: ServerLimits = ServerLimits(), hosts: HostPolicy = HostPolicy(),
               cors_origins: tuple[str, ...] = (), playground: bool = True) -> FastAPI:
    """The ASGI app serving `generator` as `model_name`; run it with uvicorn under http.config(app, limits)
    (see cli.cmd_serve), which bounds slow clients and open connections.

    api_key: when set, every route but /health and the playground page needs `Authorization: Bearer <api_key>`
    (the page is static; its requests carry the key typed into it). An empty key is refused, not "no key".
    hosts: the Host headers served (guard.HostPolicy). cors_origins: browser origins allowed to call the API
    (CORS is off without them). playground: serve the playground page (playground.html) at /.
    """
    if api_key is not None and not api_key.strip():
        raise QuickdraftError("the API key is empty: give a key, or none at all to serve without one")
    if not isinstance(limits, ServerLimits):
        raise QuickdraftError(f"limits must be a ServerLimits; got {type(limits).__name__}")
    origins = tuple(cors_origins)
    for origin in origins:
        if not isinstance(origin, str) or not re.fullmatch(r"https?://[^/\s]+|\*", origin):
            raise QuickdraftError(f"--cors-origin takes origins such as https://example.com (scheme and host, "
                                  f"no path) or *; got {origin!r}")
    metrics = Metrics()
    service = Service(generator, model_name, limits, metrics)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        service.worker.start()
        yield
        service.close()

    app = FastAPI(title="quickdraft", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None)
    app.state.service = service
    # Outermost last: responses counted (unhandled errors too) -> Host, media type, size -> CORS if asked.
    if origins:
        app.add_middleware(cors, origins=origins)
    app.add_middleware(Guard, hosts=hosts, max_body_bytes=limits.max_body_bytes, drain_limit=DRAIN_LIMIT)
    app.add_middleware(CountResponses, metrics=metrics, routes=ROUTES)
    app.add_exception_handler(ApiError, lambda request, e: e.response())
    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(RequestValidationError, lambda request, e: ApiError(400, str(e)).response())
    app.add_exception_handler(Exception, server_error)
    auth = [Depends(bearer_check(api_key))]

    if playground:
        page, csp = _playground_page()

        @app.get("/", include_in_schema=False)
        async def playground_page() -> HTMLResponse:
            return HTMLResponse(page, headers={"Content-Security-Policy": csp, "X-Frame-Options": "DENY"})

        @app.get("/favicon.ico", include_in_schema=False)
        async def no_icon() -> Response:  # a browser asks on every page load; a 404 would be a console error
            return Response(status_code=204)

    @app.get("/health")
    async def health() -> dict[str, Any]:
        service.worker.ensure_running()  # a worker thread that died is restarted here at the latest
        return {"status": "ok", "model": model_name, "queued": service.worker.queued,
                "running": service.worker.running is not None, "worker_restarts": service.worker.restarts}

    @app.get("/v1/models", dependencies=auth)
    async def list_models() -> dict[str, Any]:
        return {"object": "list", "data": [service.model_card()]}

    @app.get("/v1/models/{model_id:path}", dependencies=auth)
    async def get_model(model_id: str) -> dict[str, Any]:
        service.check_model(model_id)
        return service.model_card()

    @app.get("/metrics", dependencies=auth)
    async def prometheus() -> PlainTextResponse:
        text = metrics.render(queued=service.worker.queued, running=service.worker.running is not None,
                              worker_restarts=service.worker.restarts)
        return PlainTextResponse(text, media_type=PROMETHEUS_TEXT)

    @app.post("/v1/chat/completions", dependencies=auth)
    async def chat_completions(request: Request) -> Response:
        arrived = time.monotonic()
        req = await service.parse(request, ChatCompletionRequest)
        return await service.complete(request, req, [m.as_dict() for m in req.messages], arrived=arrived)

    @app.post("/v1/completions", dependencies=auth)
    async def completions(request: Request) -> Response:
        arrived = time.monotonic()
        req = await service.parse(request, CompletionRequest)
        return await service.complete(request, req, req.prompt, arrived=arrived)

    return app


class Service:
    """What the routes share: the generator, the worker in front of it, limits and metrics."""

    def __init__(self, generator: Generator, model_name: str, limits: ServerLimits, metrics: Metrics):
        self.generator, self.model_name, self.limits, self.metrics = generator, model_name, limits, metrics
        self.worker = Worker(limits.max_queue, on_finish=metrics.record_generation)
        self.prepare = ThreadPoolExecutor(PREPARE_THREADS, thread_name_prefix="quickdraft-prepare")
        self.created = int(time.time())

    def close(self) -> None:
        self.worker.stop()
        self.prepare.shutdown(wait=False, cancel_futures=True)

    def model_card(self) -> dict[str, Any]:
        return {"id": self.model_name, "object": "model", "created": self.created, "owned_by": "quickdraft"}

    def check_model(self, name: str) -> None:
        if name != self.model_name:
            raise ApiError(404, f"The model '{name}' does not exist; this server serves '{self.model_name}'.",
                           param="model", code="model_not_found")

    async def parse(self, request: Request, schema: type[BaseRequest]) -> Any:
        body = await self._read_body(request)

        def validate() -> Any:  # off the event loop: a body of many items takes a while to check
            try:
                return schema.model_validate_json(body)
            except ValidationError as e:
                return validation_error(e)

        parsed = await asyncio.get_running_loop().run_in_executor(self.prepare, validate)
        if isinstance(parsed, ApiError):
            raise parsed
        return parsed

    async def _read_body(self, request: Request) -> bytes:
        limit = self.limits.max_body_bytes
        pieces, size = [], 0
        try:
            async with asyncio.timeout(self.limits.body_timeout):
                async for piece in request.stream():
                    size += len(piece)
                    if size <= limit:
                        pieces.append(piece)
                    elif size > DRAIN_LIMIT:
                        break
        except ClientDisconnect:
            raise ApiError(400, "The client disconnected while sending the request body.") from None
        except TimeoutError:
            raise ApiError(408, f"The request body did not arrive within {self.limits.body_timeout:g} seconds "
                           "(--body-timeout).", code="request_timeout", headers={"Connection": "close"}) from None
        if size > limit:
            raise ApiError(413, f"The request body is larger than this server's limit of {limit} bytes "
                           "(--max-body-bytes).", code="request_too_large")
        return b"".join(pieces)

    async def complete(self, request: Request, req: Any, prompt: Any, *, arrived: float) -> Response:
        """Serve one chat or completions request: validate, queue, and answer (JSON or SSE)."""
        chat = isinstance(req, ChatCompletionRequest)
        self.check_model(req.model)
        try:
            refuse_unsupported(req)
        except UnsupportedParameter as e:
            raise ApiError(400, e.message, param=e.param, code="unsupported_parameter") from None
        if self.worker.full:  # before any tokenising: a flood is turned away cheaply
            raise self._busy()
        context = self.generator.runner.max_context
        prediction = prediction_text(req)
        for what, value in (("prompt" if not chat else "messages", prompt), ("prediction", prediction)):
            chars = _chars(value)
            if chars > context * CHARS_PER_TOKEN:
                raise ApiError(400, f"The {what} is {chars} characters long: more than this model's context of "
                               f"{context} tokens can hold (at most {context * CHARS_PER_TOKEN} characters are "
                               "accepted, 16 a token).", param=what, code="context_length_exceeded")
        default_max = context if chat else COMPLETIONS_DEFAULT_MAX_TOKENS
        try:
            options = replace(decode_options(req, default_max_tokens=default_max), chat=None if chat else False)
            start = functools.partial(self.generator.stream, prompt, options, prediction=prediction)
            stream = await asyncio.get_running_loop().run_in_executor(self.prepare, start)
        except ContextLengthError as e:  # in OpenAI's words, with its code: clients trim their history on it
            where = "messages" if chat else "prompt"
            raise ApiError(400, f"This model's maximum context length is {e.context} tokens. However, your {where} "
                           f"resulted in {e.prompt_tokens} tokens. Please reduce the length of the {where}.",
                           param=where, code="context_length_exceeded") from None
        except QuickdraftError as e:  # everything Generator.stream checks, before any model work
            raise ApiError(400, str(e)) from None
        asked = req.max_completion_tokens if chat and req.max_completion_tokens is not None else req.max_tokens
        if asked is None and not chat:  # completions' default counts against the context, as OpenAI's does
            asked = COMPLETIONS_DEFAULT_MAX_TOKENS
        if asked is not None and len(stream.prompt_ids) + asked > context:
            param = "max_completion_tokens" if chat and req.max_completion_tokens is not None else "max_tokens"
            where = "messages" if chat else "prompt"
            raise ApiError(400, f"This model's maximum context length is {context} tokens. However, you requested "
                           f"{len(stream.prompt_ids) + asked} tokens ({len(stream.prompt_ids)} in the {where}, "
                           f"{asked} in the completion). Please reduce the length of the {where} or completion.",
                           param=param, code="context_length_exceeded")

        try:
            run = Run(self.worker, request, stream, deadline=arrived + self.limits.request_timeout)
        except QueueFull:
            raise self._busy() from None
        ids = ResponseIds(chat, self.model_name)
        segments = bool(req.quickdraft and req.quickdraft.segments)
        try:
            first = await run.next()  # errors before the first token still get a proper status
        except BaseException:
            run.close()
            raise
        if not req.stream:
            try:
                kind, value = first
                while kind == "chunk":
                    kind, value = await run.next()
            finally:
                run.close()
            if kind == "disconnected":
                return Response(status_code=CLIENT_GONE)
            return JSONResponse(ids.completion(value, segments))
        include_usage = bool(req.stream_options and req.stream_options.include_usage)
        return StreamingResponse(_sse(run, ids, first, include_usage, segments), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})

    def _busy(self) -> ApiError:
        return ApiError(429, f"The server is busy: {self.worker.max_queue} requests are already waiting for the "
                        "model. Retry after a few seconds.", "requests", code="rate_limit_exceeded",
                        headers={"Retry-After": str(self.metrics.retry_after())})


def _chars(value: Any) -> int:
    """Characters of a prompt, messages or prediction as the request gave them (text parts counted)."""
    if value is None:
        return 0
    if isinstance(value, str):
        return len(value)
    if isinstance(value, dict):
        return _chars(value.get("content", value.get("text")))
    return sum(_chars(v) for v in value) if isinstance(value, (list, tuple)) else 0


class Run:
    """The event-loop side of one Job: its event queue, its deadline, and a watch for the client leaving."""

    def __init__(self, worker: Worker, request: Request, stream: Stream, deadline: float):
        loop = asyncio.get_running_loop()
        self.events: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()

        def deliver(kind: str, value: Any) -> None:  # on the worker thread
            try:
                loop.call_soon_threadsafe(self.events.put_nowait, (kind, value))
            except RuntimeError:  # the event loop is closed: nobody will read this
                self.job.cancelled.set()

        self.worker = worker
        self.job = Job(stream, deliver, deadline)
        worker.submit(self.job)  # QueueFull when the queue is full
        self._watch = asyncio.create_task(self._watch_disconnect(request.receive))

    async def _watch_disconnect(self, receive: Callable[[], Any]) -> None:
        while (await receive())["type"] != "http.disconnect":
            pass
        self.worker.cancel(self.job)  # frees the model after the current step
        self.events.put_nowait(("disconnected", None))

    async def next(self) -> tuple[str, Any]:
        """("chunk", Chunk), ("done", Result) or ("disconnected", None); ApiError on a timeout or a failure."""
        try:
            async with asyncio.timeout(max(0.0, self.job.deadline - time.monotonic())):
                kind, value = await self.events.get()
        except TimeoutError:
            kind, value = "timeout", None
        if kind == "timeout":
            self.worker.cancel(self.job, "timeout")
            raise ApiError(504, "The request did not finish within the server's time limit (--request-timeout); "
                           "ask for fewer tokens or retry later.", "timeout", code="request_timeout")
        if kind == "error":  # the worker logged the exception under the job's id
            raise ApiError(500, f"The model failed while generating (request id {self.job.id}); the server's log "
                           "has the details.", "server_error")
        return kind, value

    def close(self) -> None:
        self._watch.cancel()
        self.worker.cancel(self.job)  # a no-op once the job is done


def _playground_page() -> tuple[str, str]:
    """The page and its Content-Security-Policy: only its own inline script (by hash) runs, and it may
    connect only to this server; nothing is loaded from anywhere else."""
    page = resources.files(__package__).joinpath("playground.html").read_text(encoding="utf-8")
    script = re.search(r"<script>(.*?)</script>", page, re.S).group(1)
    digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
    csp = (f"default-src 'none'; script-src 'sha256-{digest}'; style-src 'unsafe-inline'; connect-src 'self'; "
           "img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
    return page, csp


async def _sse(run: Run, ids: ResponseIds, first: tuple[str, Any], include_usage: bool,
               segments: bool = False) -> AsyncIterator[bytes]:
    """Server-sent events: the chunks, a closing chunk with finish_reason, usage if asked, [DONE].
    segments: every step's chunk, with its "quickdraft" object, even where it released no text. A chunk that released
    no text is sent too where prediction spans became final with it."""

    def event(obj: dict[str, Any]) -> bytes:
        return b"data: " + json.dumps(obj, ensure_ascii=False).encode() + b"\n\n"

    try:
        if ids.chat:
            yield event(ids.chunk("", role=True, with_usage_field=include_usage))
        kind, value = first
        while True:
            if kind == "disconnected":
                return
            if kind == "chunk" and (segments or value.text or value.prediction_spans):
                yield event(ids.chunk(value.text, with_usage_field=include_usage, step=value if segments else None,
                                      spans=value.prediction_spans))
            elif kind == "done":
                yield event(ids.chunk(None, value.finish_reason, with_usage_field=include_usage))
                if include_usage:
                    yield event(ids.usage_chunk(value.stats))
                break
            try:
                kind, value = await run.next()
            except ApiError as e:  # headers are sent: the error goes in the stream
                yield event(e.body)
                break
        yield b"data: [DONE]\n\n"
    finally:
        run.close()
