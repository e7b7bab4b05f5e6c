"""The request limits `quickdraft serve --engine vllm` puts in front of vLLM's server, in its API server process.

    BodyLimit               ASGI middleware, named to vLLM with `--middleware quickdraft.vllm.limits.BodyLimit`
                            (vLLM builds it with the app alone, so its limit comes from QUICKDRAFT_VLLM_MAX_BODY_BYTES,
                            which the launcher sets from --max-body-bytes)
    OpenAIErrors            ASGI middleware (`--middleware quickdraft.vllm.limits.OpenAIErrors`): the error answers
                            vLLM leaves to FastAPI ({"detail": ...}: an unknown route, a wrong method, a body that is
                            not JSON text) and to its API-key check ({"error": "Unauthorized"}) as OpenAI error
                            objects, shaped as vLLM's own errors are
    prediction_limits       the most characters and tokens a `prediction` may have on a server of a given context
                            length (patches.py refuses more with a 400 before tokenizing)

Without a body limit one request can make vLLM's API server parse a body of any size; without the prediction
limits one prediction could be tokenized and drafted from at any length (the engine's worker once died for
memory on a 10.5 MB prediction, when the proposer still tokenized predictions itself).
"""

from __future__ import annotations

import asyncio
import json
import os
from http import HTTPStatus
from typing import Any, Awaitable, Callable

MAX_BODY_ENV = "QUICKDRAFT_VLLM_MAX_BODY_BYTES"
DEFAULT_MAX_BODY = 8 << 20  # as quickdraft's own server (--max-body-bytes)
MIN_MAX_BODY = 1024
# An oversized body that is on its way is read and dropped before the 413, so that a client that sends its whole
# body before reading (most do) sees the answer instead of a reset connection: up to DRAIN_LIMIT bytes, for at most
# DRAIN_SECONDS, and only while it keeps coming (a pause of DRAIN_IDLE ends it). A client that announced more than
# DRAIN_LIMIT, or waits for "100 Continue", is answered at once.
DRAIN_LIMIT = 64 << 20
DRAIN_SECONDS = 10.0
DRAIN_IDLE = 1.0
PREDICTION_CHARS_PER_TOKEN = 32  # a prediction may have 32 characters per token of the model's context, at most

Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


def check_max_body(value: Any, where: str = "--max-body-bytes") -> int:
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool) or value < MIN_MAX_BODY:
        from ..errors import QuickdraftError

        raise QuickdraftError(f"{where} must be an integer >= {MIN_MAX_BODY}; got {value!r}")
    return value


def prediction_limits(max_model_len: int) -> tuple[int, int]:
    """(most characters, most tokens) of a prediction on a server whose context holds max_model_len tokens.

    A prediction longer than the context cannot be drafted from in full anyway (prompt and output share it), and
    the character bound, checked before tokenizing, keeps the tokenizer's work proportional to the context.

    >>> prediction_limits(2048)
    (65536, 2048)
    """
    return max_model_len * PREDICTION_CHARS_PER_TOKEN, max_model_len


def error_body(message: str, type_: str, status: int) -> bytes:
    """An OpenAI-style error object shaped as vLLM's own (its ErrorResponse: the status as the code)."""
    return json.dumps({"error": {"message": message, "type": type_, "param": None, "code": status}}).encode()


class TooLarge(Exception):
    pass


class BodyLimit:
    """Refuses request bodies over the limit with 413 and an OpenAI error object, before the app reads them.

    A Content-Length over the limit is answered from the header (what of the body is already on its way is dropped
    first: DRAIN_LIMIT); a body without one (chunked) is read up to the limit and refused as soon as it passes it.
    A body within the limit is handed to the app as it came, read in full first (vLLM's routes parse the whole JSON
    body anyway), so the app never sees a partial one.
    """

    def __init__(self, app: Any, max_body_bytes: int | None = None):
        self.app = app
        raw = os.environ.get(MAX_BODY_ENV) if max_body_bytes is None else max_body_bytes
        self.limit = DEFAULT_MAX_BODY if raw in (None, "") else check_max_body(raw, MAX_BODY_ENV)

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = {k.lower(): v for k, v in scope.get("headers", ())}
        length = headers.get(b"content-length")
        if length is None and b"transfer-encoding" not in headers:
            return await self.app(scope, receive, send)  # no body (GET /health, /v1/models)
        if length is not None:
            try:
                declared = int(length)
            except ValueError:
                return await self._refuse(send, 400, "The Content-Length header is not a number.", "BadRequestError")
            if declared > self.limit:
                if declared <= DRAIN_LIMIT and headers.get(b"expect", b"").lower() != b"100-continue":
                    await self._drain(receive, declared)
                return await self._too_large(send)
        try:
            body = await self._read(receive)
        except TooLarge:
            await self._drain(receive, DRAIN_LIMIT)
            return await self._too_large(send)
        if body is None:
            return  # the client went away while sending
        replayed = False

        async def replay() -> dict[str, Any]:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()  # after the body: the disconnect the app may wait for

        await self.app(scope, replay, send)

    async def _read(self, receive: Receive) -> bytes | None:
        pieces, size = [], 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            piece = message.get("body", b"")
            size += len(piece)
            if size > self.limit:
                raise TooLarge
            pieces.append(piece)
            if not message.get("more_body", False):
                return b"".join(pieces)

    @staticmethod
    async def _drain(receive: Receive, most: int) -> None:
        """Read and drop up to `most` bytes of the body while it keeps coming (DRAIN_IDLE, DRAIN_SECONDS)."""
        loop = asyncio.get_running_loop()
        end, size = loop.time() + DRAIN_SECONDS, 0
        while size <= most:
            try:
                message = await asyncio.wait_for(receive(), min(DRAIN_IDLE, max(end - loop.time(), 0)))
            except asyncio.TimeoutError:
                return
            if message["type"] == "http.disconnect" or not message.get("more_body", False):
                return
            size += len(message.get("body", b""))

    async def _too_large(self, send: Send) -> None:
        await self._refuse(send, 413, f"The request body is larger than this server's limit of {self.limit} bytes "
                           "(quickdraft serve --max-body-bytes).", "RequestTooLargeError")

    @staticmethod
    async def _refuse(send: Send, status: int, message: str, type_: str) -> None:
        body = error_body(message, type_, status)
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                                (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": body})


def openai_error(body: bytes, status: int) -> bytes | None:
    """An error answer's body as an OpenAI error object, or None if it is one already (or not JSON).

    >>> openai_error(b'{"detail": "Not Found"}', 404)
    b'{"error": {"message": "Not Found", "type": "NotFoundError", "param": null, "code": 404}}'
    """
    try:
        parsed = json.loads(body)
    except ValueError:
        return None
    if isinstance(parsed, dict) and isinstance(parsed.get("error"), dict):
        return None
    message = parsed.get("detail", parsed.get("error", parsed)) if isinstance(parsed, dict) else parsed
    if not isinstance(message, str):
        message = json.dumps(message)
    try:
        kind = HTTPStatus(status).phrase.title().replace(" ", "").replace("-", "") + "Error"
    except ValueError:
        kind = "Error"
    return error_body(message, kind.replace("ErrorError", "Error"), status)


class OpenAIErrors:
    """Error answers (status >= 400, JSON) that are not OpenAI error objects, rewritten as ones; every other answer,
    streams included, passes through untouched."""

    def __init__(self, app: Any):
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        held: dict[str, Any] | None = None
        pieces: list[bytes] = []

        async def reshape(message: dict[str, Any]) -> None:
            nonlocal held
            if message["type"] == "http.response.start":
                headers = {k.lower(): v for k, v in message.get("headers", ())}
                if message["status"] >= 400 and headers.get(b"content-type", b"").startswith(b"application/json"):
                    held = message  # answered once its body is complete
                    return
                return await send(message)
            if held is None or message["type"] != "http.response.body":
                return await send(message)
            pieces.append(message.get("body", b""))
            if message.get("more_body", False):
                return
            body = b"".join(pieces)
            body = openai_error(body, held["status"]) or body
            headers = [(k, v) for k, v in held.get("headers", ()) if k.lower() != b"content-length"]
            await send({**held, "headers": headers + [(b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})

        await self.app(scope, receive, reshape)
