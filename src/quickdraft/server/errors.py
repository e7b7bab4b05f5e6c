"""Errors as OpenAI error objects: the exception routes raise, and the answers to what fails before a route
(malformed bodies, unknown URLs, a missing key) or inside one (a 500, which names a request id, never the
exception: the log has it under that id)."""

from __future__ import annotations

import hmac
import logging
import uuid
from typing import Any, Callable

from fastapi import Request
from fastapi.responses import JSONResponse
from pydantic import ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from .schemas import error_body, json_type

log = logging.getLogger("quickdraft.server")


class ApiError(Exception):
    """Answered as an OpenAI error object with this status."""

    def __init__(self, status: int, message: str, type_: str = "invalid_request_error", param: str | None = None,
                 code: str | None = None, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status, self.headers = status, headers
        self.body = error_body(message, type_, param, code)

    def response(self) -> JSONResponse:
        return JSONResponse(self.body, status_code=self.status, headers=self.headers)


def request_id() -> str:
    return "req_" + uuid.uuid4().hex[:20]


def server_error(request: Request, e: Exception) -> JSONResponse:
    """An unexpected exception in a route: logged with an id; the client gets the id, not the exception."""
    rid = request_id()
    log.error("request %s failed: %s %s", rid, request.method, request.url.path, exc_info=e)
    return ApiError(500, f"The server had an error while processing your request (request id {rid}); its log has "
                    "the details.", "server_error").response()


def _param(loc: tuple[Any, ...]) -> str:
    """('messages', 0, 'content') -> 'messages[0].content'"""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


_EXPECTED = {"int_type": "an integer", "float_type": "a number", "string_type": "a string", "bool_type": "a boolean",
             "list_type": "an array", "model_type": "an object", "dict_type": "an object"}


def validation_error(e: ValidationError) -> ApiError:
    err = e.errors(include_url=False)[0]
    kind, loc, param = err["type"], err["loc"], _param(err["loc"])
    if kind == "json_invalid":
        return ApiError(400, f"We could not parse the JSON body of your request ({err['msg']}). "
                        "The body must be a JSON object.", code="invalid_json")
    if not loc:
        return ApiError(400, f"The request body must be a JSON object; got {json_type(err['input'])}.",
                        code="invalid_type")
    if kind == "extra_forbidden":
        return ApiError(400, f"Unrecognized request argument supplied: {param}", param=param, code="unknown_parameter")
    if kind == "missing":
        return ApiError(400, f"Missing required parameter: '{param}'.", param=param, code="missing_required_parameter")
    if kind.endswith("_type"):
        expected = _EXPECTED.get(kind, kind.removesuffix("_type").replace("_", " "))
        return ApiError(400, f"Invalid type for '{param}': expected {expected}, but got {json_type(err['input'])} "
                        "instead.", param=param, code="invalid_type")
    message = err["msg"].removeprefix("Value error, ")
    return ApiError(400, f"Invalid value for '{param}': {message}.", param=param, code="invalid_value")


def http_error(request: Request, e: StarletteHTTPException) -> JSONResponse:
    if e.status_code == 404:
        message = f"Unknown request URL: {request.method} {request.url.path}."
    elif e.status_code == 405:
        message = f"Method {request.method} is not allowed for {request.url.path}."
    else:
        message = str(e.detail)
    return ApiError(e.status_code, message, code="unknown_url" if e.status_code == 404 else None,
                    headers=getattr(e, "headers", None)).response()


def bearer_check(api_key: str | None) -> Callable[[Request], Any]:
    expected = api_key.encode() if api_key else None

    async def require_key(request: Request) -> None:
        if expected is None:
            return
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        challenge = {"WWW-Authenticate": "Bearer"}
        if scheme.lower() != "bearer" or not token.strip():
            raise ApiError(401, "You didn't provide an API key: send it as 'Authorization: Bearer YOUR_KEY' "
                           "(the openai client's api_key).", headers=challenge)
        if not hmac.compare_digest(token.strip().encode(), expected):
            raise ApiError(401, "Incorrect API key provided.", code="invalid_api_key", headers=challenge)

    return require_key
