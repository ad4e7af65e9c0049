"""Fixtures for the chaos tests: a proxy server in a thread, small loopback TCP servers, toxiproxy-python wired
to our proxy. Everything started here is stopped here, by handle."""

from __future__ import annotations

import socket
import socketserver
import threading
from collections.abc import Iterator

import pytest
from toxiproxy.api import APIConsumer
from toxiproxy.server import Toxiproxy

from chaos.proxy import ProxyServer


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    block_on_close = False

    def __init__(self, handler: type[socketserver.BaseRequestHandler], **state: object) -> None:
        self.state = state
        super().__init__(("127.0.0.1", 0), handler)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.server_address[1]}"


class _Echo(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            while data := self.request.recv(65536):
                self.request.sendall(data)
        except OSError:  # reset_peer resets this side too
            pass


class _Source(socketserver.BaseRequestHandler):
    """Sends `size` bytes on connect, then closes."""

    def handle(self) -> None:
        size = int(self.server.state["size"])  # type: ignore[attr-defined]
        try:
            self.request.sendall(bytes(i % 251 for i in range(size)))
        except OSError:
            pass


def _run(server: _Server) -> Iterator[_Server]:
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


@pytest.fixture
def echo_server() -> Iterator[_Server]:
    yield from _run(_Server(_Echo))


@pytest.fixture
def source_server() -> Iterator[_Server]:
    """Sends 300 000 bytes per connection (change server.state['size'] before connecting)."""
    yield from _run(_Server(_Source, size=300_000))


@pytest.fixture
def proxy_server() -> Iterator[ProxyServer]:
    server = ProxyServer("127.0.0.1:0", seed=7).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def toxiproxy(proxy_server: ProxyServer) -> Iterator[Toxiproxy]:
    """The unmodified toxiproxy-python client, pointed at our proxy (its address is a class attribute)."""
    saved = (APIConsumer.host, APIConsumer.port)
    client = Toxiproxy()
    client.update_api_consumer(proxy_server.api_host, proxy_server.api_port)
    try:
        yield client
    finally:
        APIConsumer.host, APIConsumer.port = saved
