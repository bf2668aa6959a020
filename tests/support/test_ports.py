"""The free-port helper the test servers start on."""

from __future__ import annotations

import socket

from tests.support.ports import LOOPBACK, free_ports


def test_ports_asked_for_together_are_distinct_and_free() -> None:
    # Two hundred ports asked one at a time from the ephemeral range repeat one another
    # more often than not (the birthday bound); a broker given the same port for two
    # listeners refuses to start.
    ports = free_ports(200)
    assert len(set(ports)) == len(ports)
    for port in ports:
        with socket.socket() as server:
            server.bind((LOOPBACK, port))
