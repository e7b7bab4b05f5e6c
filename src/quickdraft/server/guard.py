"""What the server refuses before a route runs: foreign hosts, browser-borne bodies, oversized bodies.

A local server without an API key is reachable by any web page its user opens: the page can POST to
it without a CORS preflight when the body is `text/plain` or a form, and a DNS-rebinding page reaches
it under a name of its own. So, in this order, on every HTTP request:

    Host header not allowed            400 invalid_host    (HostPolicy: the listening address, localhost,
                                                            IP literals on a wildcard address, --allowed-hosts)
    POST body not application/json     415                  (no browser sends that cross-site without a preflight)
    Content-Length over the body limit 413 before reading   (huge announced bodies: answered and closed at once)

and every response gets `X-Content-Type-Options: nosniff`. CORS stays off unless origins are named
(`--cors-origin`, Starlette's CORSMiddleware around this one).
"""

from __future__ import annotations

import ipaddress
import json
from dataclasses import dataclass
from typing import Any

from ..errors import QuickdraftError
from .schemas import error_body

WILDCARDS = ("0.0.0.0", "::", "")
LOCAL_NAMES = ("localhost", "127.0.0.1", "::1")


def _ip(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def host_name(header: str) -> str:
    """A Host header's host, lower case, without port or IPv6 brackets: "[::1]:8000" -> "::1"."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1:header.find("]")] if "]" in header else header
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


@dataclass(frozen=True)
class HostPolicy:
    """Which Host headers are served: those naming the address the server listens on, localhost, any IP
    literal when it listens on all addresses (a rebinding page always sends a name, never an address),
    and the names in `allowed` ("*" allows every host)."""

    listen: str = "127.0.0.1"
    allowed: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for name in self.allowed:
            if not isinstance(name, str) or not name.strip() or "/" in name or " " in name.strip():
                raise QuickdraftError(f"--allowed-hosts takes host names (or *); got {name!r}")

    def allows(self, header: str | None) -> bool:
        if "*" in self.allowed:
            return True
        if not header:
            return False  # HTTP/1.1 requires Host; a request without one is not from a browser we serve
        host = host_name(header)
        if host in LOCAL_NAMES or host == host_name(self.listen) or host in (h.lower() for h in self.allowed):
            return True
        return self.listen in WILDCARDS and _ip(host) is not None


def _error(status: int, message: str, code: str | None) -> tuple[int, bytes]:
    body = error_body(message, "invalid_request_error", None, code)
    return status, json.dumps(body).encode()


class Guard:
    """ASGI middleware applying the checks above before the app sees a request."""

    def __init__(self, app: Any, hosts: HostPolicy, max_body_bytes: int, drain_limit: int):
        self.app, self.hosts, self.max_body_bytes, self.drain_limit = app, hosts, max_body_bytes, drain_limit

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        refusal = self.refusal(scope["method"], headers)
        if refusal is not None:
            status, body, close = refusal
            extra = [(b"connection", b"close")] if close else []
            await send({"type": "http.response.start", "status": status, "headers": [
                (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                (b"x-content-type-options", b"nosniff"), *extra]})
            await send({"type": "http.response.body", "body": body})
            return

        async def send_nosniff(message: dict) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), (b"x-content-type-options", b"nosniff")]}
            await send(message)

        await self.app(scope, receive, send_nosniff)

    def refusal(self, method: str, headers: dict[str, str]) -> tuple[int, bytes, bool] | None:
        """(status, body, close the connection) for a request refused on its headers, or None."""
        host = headers.get("host")
        if not self.hosts.allows(host):
            return (*_error(400, f"The Host header {host!r} is not one this server answers to; start it with "
                            "--allowed-hosts NAME to serve that name.", "invalid_host"), False)
        if method != "POST":
            return None
        media = headers.get("content-type", "").split(";", 1)[0].strip().lower()
        if media != "application/json":
            got = f"'{media}'" if media else "none"
            return (*_error(415, f"The request body must be JSON sent with 'Content-Type: application/json'; got {got}.",
                            "unsupported_media_type"), False)
        length = headers.get("content-length", "")
        if length.isdigit() and int(length) > self.max_body_bytes:
            # Small excess: the app reads and drops the body so the client sees the answer; large: answer, close.
            if int(length) > self.drain_limit:
                return (*_error(413, f"The request body is {int(length)} bytes, over this server's limit of "
                                f"{self.max_body_bytes} bytes (--max-body-bytes).", "request_too_large"), True)
        return None


def cors(app: Any, origins: tuple[str, ...]) -> Any:
    """Starlette's CORSMiddleware for `origins`, its refused preflights answered as OpenAI error objects."""
    from starlette.middleware.cors import CORSMiddleware
    from starlette.responses import JSONResponse

    class Cors(CORSMiddleware):
        def preflight_response(self, request_headers: Any) -> Any:
            response = super().preflight_response(request_headers)
            if response.status_code != 400:
                return response
            headers = {k: v for k, v in response.headers.items() if k not in ("content-type", "content-length")}
            status, body = _error(400, f"{response.body.decode()}: this server allows cross-origin requests from "
                                  f"{', '.join(origins)} only (--cors-origin).", "cors_refused")
            return JSONResponse(json.loads(body), status_code=status, headers=headers)

    return Cors(app, allow_origins=list(origins), allow_methods=["GET", "POST"],
                allow_headers=["authorization", "content-type"], max_age=600)
