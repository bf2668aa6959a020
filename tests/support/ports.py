"""Free loopback ports for the servers the tests start.

The kernel hands out a free port to a socket bound to port 0; the socket is closed again so
that the server can bind it, so another process may take it in between (the callers that
start a server retry on a bind failure). Ports one server needs together are asked for
while all their sockets are open, so they are never the same port twice.
"""

from __future__ import annotations

import contextlib
import socket

LOOPBACK = "127.0.0.1"


def free_ports(count: int) -> list[int]:
    """`count` distinct free loopback ports."""
    with contextlib.ExitStack() as stack:
        probes = [stack.enter_context(socket.socket()) for _ in range(count)]
        for probe in probes:
            probe.bind((LOOPBACK, 0))
        return [int(probe.getsockname()[1]) for probe in probes]


def free_port() -> int:
    """One free loopback port."""
    return free_ports(1)[0]
