"""The Host header check that keeps a web page from reaching an HTTP API without a token.

A page on another site cannot read a loopback server's answers (the browser's same-origin
policy), unless it re-points its own host name at 127.0.0.1 (DNS rebinding): the page is
then same-origin with the server, and its requests carry `Host: attacker.example:9621`. A
server without a token refuses such a request by its Host: it answers only the host names
it serves under, by default the loopback names when it binds a loopback address. A server
with a token needs no check (a page has no token), nor does one bound to another address
with no names given (it is meant to be reached by whatever name points at it).
"""

from __future__ import annotations

import ipaddress

import grpc
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from gateway.http.errors import ErrorShapes

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")


def served_hosts(bind_host: str, configured: tuple[str, ...]) -> frozenset[str] | None:
    """The host names (without port, lower case) a request's Host may give, or None for
    any: the `configured` names; or, for a loopback `bind_host`, the loopback names."""
    if configured:
        return frozenset(name.strip("[]").lower() for name in configured)
    if bind_host == "localhost" or _is_loopback(bind_host):
        return frozenset(LOOPBACK_NAMES)
    return None


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def host_name(header: str) -> str:
    """The name of a Host header, without its port ("[::1]:9621" -> "::1")."""
    if header.startswith("["):
        return header[1 : header.find("]")].lower()
    return header.rpartition(":")[0].lower() if ":" in header else header.lower()


class HostCheckMiddleware:
    """Refuses (403, in the error shape of the path) an HTTP request whose Host header
    names none of `hosts`."""

    def __init__(self, app: ASGIApp, hosts: frozenset[str], errors: ErrorShapes) -> None:
        self.app = app
        self.hosts = hosts
        self.errors = errors

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            header = Headers(scope=scope).get("host", "")
            if host_name(header) not in self.hosts:
                message = (
                    f"the host {header!r} is not one this server answers to: add it to "
                    "http_allowed_hosts (KGSTREAM_HTTP_ALLOWED_HOSTS), e.g. the name a proxy "
                    "forwards, or set grpc_auth_token"
                )
                response = self.errors.response(
                    scope["path"], 403, grpc.StatusCode.PERMISSION_DENIED, message
                )
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)
