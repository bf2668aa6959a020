"""The HTTP API's server: uvicorn on its own thread, beside the gRPC server.

The socket is bound here, before uvicorn starts, so a port in use fails the caller at once
(OSError) and an address ending in ":0" gets a free port that `RunningHttpServer.port`
reports. Stopping asks uvicorn to exit and gives open responses (server-sent event
streams never end by themselves) `SHUTDOWN_GRACE_SECONDS` before they are cut.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from dataclasses import dataclass

import uvicorn
from starlette.types import ASGIApp

SHUTDOWN_GRACE_SECONDS = 2
START_TIMEOUT_SECONDS = 30.0


@dataclass(frozen=True)
class RunningHttpServer:
    server: uvicorn.Server
    thread: threading.Thread
    sock: socket.socket
    host: str
    port: int

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=SHUTDOWN_GRACE_SECONDS + 10)
        self.sock.close()


def serve_http(app: ASGIApp, address: str) -> RunningHttpServer:
    """Serve `app` on `address` ("host:port") until `stop()`; returns once it accepts."""
    host, _, port_text = address.rpartition(":")
    host = host.strip("[]")
    if not host or not port_text.isdigit():
        raise ValueError(
            f"the HTTP address must be host:port (e.g. 127.0.0.1:9621); got {address!r}"
        )
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, int(port_text)))
    except OSError as error:
        sock.close()
        raise OSError(f"cannot bind the HTTP API to {address}: {error.strerror}") from error
    sock.listen(128)
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        app,
        log_config=None,  # kgstream's logging (kgstream/logs.py) stays as it is
        log_level=logging.WARNING,
        access_log=False,
        lifespan="on",  # the app's lifespan runs what its mounts need (the MCP endpoint's)
        timeout_graceful_shutdown=SHUTDOWN_GRACE_SECONDS,
        server_header=False,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [sock]}, name="kgstream-http", daemon=True
    )
    thread.start()
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while not server.started and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.005)  # uvicorn sets `started` and offers no callback
    if not server.started:
        server.should_exit = True
        sock.close()
        raise OSError(f"the HTTP API on {address} did not start")
    return RunningHttpServer(server=server, thread=thread, sock=sock, host=host, port=port)
