"""Proxies, connections and links: the byte pumps, with each direction's toxic chain applied in order.

A `Proxy` listens and, per accepted client, dials its upstream and runs a `Connection` of two `Link`s:
upstream (client -> server) and downstream (server -> client), Toxiproxy's names. A link reads with one task and
writes with another, so a latency toxic delays each chunk from when it was *read* (chunks pipeline). With no
toxic on a link the reader writes straight through (the fast path the benchmark measures).

Toxics apply to live connections: adding, updating or removing one marks every link dirty; the link re-syncs
its chain before its next chunk (and at once, for timers). Removing a toxic interrupts its waits and forwards
whatever it still holds, so bytes are never silently dropped unless a toxic's purpose is dropping them.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import random
import socket
import struct
import time
from collections import deque
from typing import Any

from .errors import ApiError, listen_error
from .frames import FrameCounter, RequestTap
from .toxics.base import Chunk, Stub, Toxic

log = logging.getLogger("chaos.proxy")

UPSTREAM = "upstream"
DOWNSTREAM = "downstream"
STREAMS = (UPSTREAM, DOWNSTREAM)  # Toxiproxy lists upstream toxics first
READ_SIZE = 256 * 1024
QUEUE_CHUNKS = 1024  # Toxiproxy's latency buffer size
_CHANGED = object()


class ToxicWrapper:
    """A named toxic on a proxy: the generic metadata (name, type, stream, toxicity) around its config."""

    def __init__(self, name: str, type_: str, stream: str, toxicity: float, toxic: Toxic) -> None:
        self.name = name
        self.type = type_
        self.stream = stream
        self.toxicity = toxicity
        self.toxic = toxic
        self.generation = 0  # bumped on update: links re-roll toxicity and restart timers
        self.shared: dict[str, Any] = {}  # state across all connections (e.g. a "first N times" counter)

    def to_json(self) -> dict[str, Any]:
        return {
            "attributes": self.toxic.attributes(),
            "name": self.name,
            "type": self.type,
            "stream": self.stream,
            "toxicity": self.toxicity,
        }


class Link:
    """One direction of a connection: read task -> queue -> toxic chain -> write, with a no-toxic fast path."""

    def __init__(self, conn: Connection, direction: str, src: asyncio.StreamReader, dst: asyncio.StreamWriter):
        self.connection = conn
        self.direction = direction
        self.src = src
        self.dst = dst
        self.tracker = FrameCounter()
        self.queue: asyncio.Queue[Any] = asyncio.Queue(QUEUE_CHUNKS)
        self.active: list[tuple[ToxicWrapper, Stub]] = []
        self.dirty = bool(conn.proxy.chains[direction])
        self.busy = False
        self.out_closed = False

    # -- toxic chain maintenance
    def toxics_changed(self, removed: ToxicWrapper | None = None) -> None:
        """Called by the proxy on any toxic change; wakes the writer so timers and flushes happen now."""
        self.dirty = True
        if removed is not None:
            for w, stub in self.active:
                if w is removed:
                    stub.stop()  # wake its sleeps now; its held bytes are forwarded in _sync
        with contextlib.suppress(asyncio.QueueFull):
            self.queue.put_nowait(_CHANGED)

    def _attach(self, w: ToxicWrapper) -> Stub:
        proxy = self.connection.proxy
        state = w.toxic.new_state() if hasattr(w.toxic, "new_state") else None
        stub = Stub(self, state, proxy.rng, proxy.rng.random() < w.toxicity)
        stub.generation = w.generation
        if stub.enabled and hasattr(w.toxic, "on_attach"):
            w.toxic.on_attach(stub)
        return stub

    async def _sync(self) -> None:
        self.dirty = False
        chain = self.connection.proxy.chains[self.direction]
        old = self.active
        kept = {id(w): stub for w, stub in old}
        new: list[tuple[ToxicWrapper, Stub]] = []
        for w in chain:
            stub = kept.get(id(w))
            if stub is None:
                stub = self._attach(w)
            elif stub.generation != w.generation:
                stub.stop()
                fresh = self._attach(w)
                fresh.state = stub.state
                stub = fresh
            new.append((w, stub))
        self.active = new
        current = {id(w) for w in chain}
        for i, (w, stub) in enumerate(old):
            if id(w) in current:
                continue
            stub.stop()
            leftover = w.toxic.cleanup(stub) if hasattr(w.toxic, "cleanup") and stub.enabled else None
            if leftover:
                before = {id(x) for x, _ in old[:i]}
                rest = [e for e in new if id(e[0]) not in before]
                await self._through(rest, 0, Chunk(leftover, time.monotonic()))

    # -- pumps
    def _fast(self) -> bool:
        return not self.dirty and not self.active and not self.busy and self.queue.empty()

    async def read_loop(self) -> None:
        try:
            while True:
                data = await self.src.read(READ_SIZE)
                if not data:
                    break
                if self._fast():
                    await self._deliver(Chunk(data, 0.0))
                else:
                    await self.queue.put(Chunk(data, time.monotonic()))
        except (ConnectionError, OSError):
            pass
        finally:
            await self.queue.put(None)

    async def write_loop(self) -> None:
        while True:
            item = await self.queue.get()
            self.busy = True
            try:
                if self.dirty:
                    await self._sync()
                if item is _CHANGED:
                    continue
                await self._through(self.active, 0, item)
                if item is None:
                    return
            finally:
                self.busy = False

    async def _through(self, chain: list[tuple[ToxicWrapper, Stub]], i: int, chunk: Chunk | None) -> None:
        while i < len(chain) and (not chain[i][1].enabled or chain[i][1].interrupted.is_set()):
            i += 1
        if i == len(chain):
            await self._deliver(chunk)
            return
        w, stub = chain[i]

        async def forward(c: Chunk | None, _chain: Any = chain, _next: int = i + 1) -> None:
            await self._through(_chain, _next, c)

        await w.toxic.pipe(chunk, stub, forward)

    async def _deliver(self, chunk: Chunk | None) -> None:
        if self.out_closed:
            return
        if chunk is None:
            self.close_output()
            return
        data = chunk.data
        if not data:
            return
        try:
            if self.direction == DOWNSTREAM and self.connection.injections:
                self._write_with_injections(data)
            else:
                if self.connection.request_tap is not None and self.direction == UPSTREAM:
                    self.connection.request_tap.feed(data)  # before the server can answer it
                self.tracker.feed(data)
                self.dst.write(data)
            await self.dst.drain()
        except (ConnectionError, OSError):
            self.close_output()

    def _write_with_injections(self, data: bytes) -> None:
        """Write server responses, slotting each synthetic response in right after the one it must follow."""
        base = self.tracker.completed
        ends = self.tracker.feed(data, want_ends=True) or []
        start = 0
        for k, end in enumerate(ends):
            self.dst.write(data[start:end])
            start = end
            self.connection.flush_injections(base + k + 1)
        if start < len(data):
            self.dst.write(data[start:])

    def close_output(self) -> None:
        """Close this link's destination (both its directions, as Toxiproxy does); the other link follows."""
        if self.out_closed:
            return
        self.out_closed = True
        with contextlib.suppress(Exception):
            self.dst.close()

    def stop(self) -> None:
        for _, stub in self.active:
            stub.stop()


class Connection:
    """A client connection and its upstream connection, pumped by two links."""

    def __init__(
        self,
        proxy: Proxy,
        client: tuple[asyncio.StreamReader, asyncio.StreamWriter],
        server: tuple[asyncio.StreamReader, asyncio.StreamWriter],
    ) -> None:
        self.proxy = proxy
        self.client_writer = client[1]
        self.server_writer = server[1]
        self.up = Link(self, UPSTREAM, client[0], server[1])
        self.down = Link(self, DOWNSTREAM, server[0], client[1])
        self.tasks: list[asyncio.Task[None]] = []
        # Kafka-aware toxics: synthetic responses waiting for the server's responses they must follow.
        self.injections: deque[tuple[int, bytes]] = deque()
        self.no_response_requests = 0  # forwarded requests the server will not answer (Produce acks=0)
        self.request_tap: RequestTap | None = None  # set by watch_requests() (response-rewriting toxics)
        if any(_watches(w) for w in proxy.chains[DOWNSTREAM]):
            self.watch_requests()  # from the first request, before any response makes the chain attach

    def links(self) -> tuple[Link, Link]:
        return self.up, self.down

    async def run(self) -> None:
        self.tasks = [asyncio.ensure_future(c) for link in self.links() for c in (link.read_loop(),
                                                                                   link.write_loop())]
        try:
            await asyncio.gather(*self.tasks, return_exceptions=True)
        finally:
            self.close()

    def close(self) -> None:
        for link in self.links():
            link.stop()
            link.close_output()
        for t in self.tasks:
            if t is not asyncio.current_task():
                t.cancel()

    def reset(self) -> None:
        """Abort both sides with SO_LINGER 0, so each peer sees a TCP RST (reset_peer)."""
        for link in self.links():
            link.out_closed = True
            sock = link.dst.get_extra_info("socket")
            with contextlib.suppress(OSError, AttributeError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            with contextlib.suppress(Exception):
                link.dst.transport.abort()

    # -- Kafka-aware toxics
    def requests_expecting_response(self) -> int:
        """Requests forwarded to the server so far that it will answer."""
        return self.up.tracker.completed - self.no_response_requests

    def watch_requests(self) -> RequestTap:
        """Start (once) recording the API key and version of each request forwarded from now on."""
        if self.request_tap is None:
            self.request_tap = RequestTap(self.up.tracker)
        return self.request_tap

    def inject_response(self, after: int, frame: bytes) -> None:
        """Send `frame` to the client right after the server's `after`-th response on this connection."""
        self.injections.append((after, frame))
        if self.down.tracker.at_boundary:
            self.flush_injections(self.down.tracker.completed)

    def flush_injections(self, delivered: int) -> None:
        while self.injections and self.injections[0][0] <= delivered:
            _, frame = self.injections.popleft()
            if not self.down.out_closed:
                self.client_writer.write(frame)


def _watches(w: ToxicWrapper) -> bool:
    """Does this toxic read the connection's requests (a response rewriter)?"""
    return bool(getattr(w.toxic, "watches_requests", False))


def split_address(address: str) -> tuple[str, int]:
    """'host:port' -> (host, port); ValueError if malformed. An empty host means loopback here."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise ValueError(f"address {address}: missing port in address" if not sep else
                         f"address {address}: invalid port")
    host = host.strip("[]") or "127.0.0.1"
    return host, int(port)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class Proxy:
    """One named proxy: listen address, upstream, enabled flag, and a toxic chain per direction."""

    def __init__(self, name: str, listen: str, upstream: str, rng: random.Random, loopback_only: bool = True):
        self.name = name
        self.listen = listen
        self.upstream = upstream
        self.enabled = False
        self.rng = rng
        self.loopback_only = loopback_only
        self.chains: dict[str, list[ToxicWrapper]] = {UPSTREAM: [], DOWNSTREAM: []}
        self.connections: set[Connection] = set()
        self._server: asyncio.Server | None = None
        self._handlers: set[asyncio.Task[None]] = set()

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "listen": self.listen, "upstream": self.upstream, "enabled": self.enabled,
                "toxics": [w.to_json() for w in self.toxics()]}

    # -- lifecycle
    async def start(self) -> None:
        """Listen (Toxiproxy's start): on failure answer 500 with the listen error, stay disabled."""
        if self.enabled:
            return
        if not self.listen:  # Go listens on "" as any address, any port; we stay on loopback
            self.listen = "127.0.0.1:0"
        try:
            host, port = split_address(self.listen)
        except ValueError as e:
            raise listen_error(self.listen, str(e).split(": ", 1)[-1]) from None
        if self.loopback_only and not is_loopback(host):
            raise listen_error(self.listen, "refused: this proxy listens on loopback only")
        try:
            self._server = await asyncio.start_server(self._accept, host, port, reuse_address=True)
        except OSError as e:
            raise listen_error(self.listen, e) from None
        sockname = self._server.sockets[0].getsockname()
        self.listen = f"{sockname[0]}:{sockname[1]}"
        self.enabled = True

    async def stop(self) -> None:
        """Stop listening and close every open connection (a disabled proxy refuses and cuts)."""
        if not self.enabled:
            return
        self.enabled = False
        if self._server is not None:
            self._server.close()
            self._server = None
        for conn in list(self.connections):
            conn.close()
        for t in list(self._handlers):
            t.cancel()
        if self._handlers:
            await asyncio.wait(list(self._handlers), timeout=2.0)

    async def update(self, listen: str, upstream: str, enabled: bool) -> None:
        if listen != self.listen or upstream != self.upstream:
            await self.stop()
            self.listen, self.upstream = listen, upstream
        if enabled and not self.enabled:
            await self.start()
        elif not enabled:
            await self.stop()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        try:
            try:
                host, port = split_address(self.upstream)
                server = await asyncio.wait_for(asyncio.open_connection(host, port), 10.0)
            except (OSError, ValueError, TimeoutError) as e:
                log.info("proxy %s: cannot reach upstream %s: %s", self.name, self.upstream, e)
                writer.close()
                return
            for w in (writer, server[1]):
                with contextlib.suppress(OSError, AttributeError):
                    w.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn = Connection(self, (reader, writer), server)
            self.connections.add(conn)
            try:
                await conn.run()
            finally:
                self.connections.discard(conn)
        except asyncio.CancelledError:
            pass
        finally:
            self._handlers.discard(task)
            writer.close()  # whatever happened (disabled while dialling, upstream down), the client is cut

    # -- toxics
    def toxics(self) -> list[ToxicWrapper]:
        return [w for s in STREAMS for w in self.chains[s]]

    def get_toxic(self, name: str) -> ToxicWrapper | None:
        return next((w for w in self.toxics() if w.name == name), None)

    def _links(self, stream: str) -> list[Link]:
        return [c.up if stream == UPSTREAM else c.down for c in self.connections]

    def add_toxic(self, w: ToxicWrapper) -> None:
        self.chains[w.stream].append(w)
        for link in self._links(w.stream):
            if _watches(w):
                link.connection.watch_requests()
            link.toxics_changed()

    def update_toxic(self, w: ToxicWrapper) -> None:
        w.generation += 1
        for link in self._links(w.stream):
            link.toxics_changed()

    def remove_toxic(self, w: ToxicWrapper) -> None:
        self.chains[w.stream].remove(w)
        for link in self._links(w.stream):
            link.toxics_changed(removed=w)

    def reset_toxics(self) -> None:
        for w in self.toxics():
            self.remove_toxic(w)


class ProxyCollection:
    """All proxies of one server, by name (Toxiproxy's ProxyCollection)."""

    def __init__(self, rng: random.Random, loopback_only: bool = True) -> None:
        self.proxies: dict[str, Proxy] = {}
        self.rng = rng
        self.loopback_only = loopback_only

    def get(self, name: str) -> Proxy:
        from .errors import PROXY_NOT_FOUND

        proxy = self.proxies.get(name)
        if proxy is None:
            raise PROXY_NOT_FOUND
        return proxy

    def new_proxy(self, name: str, listen: str, upstream: str) -> Proxy:
        return Proxy(name, listen, upstream, self.rng, self.loopback_only)

    async def add(self, proxy: Proxy, enabled: bool) -> None:
        from .errors import PROXY_ALREADY_EXISTS

        if proxy.name in self.proxies:
            raise PROXY_ALREADY_EXISTS
        if enabled:
            await proxy.start()
        self.proxies[proxy.name] = proxy

    async def add_or_replace(self, proxy: Proxy, enabled: bool) -> Proxy:
        existing = self.proxies.get(proxy.name)
        if existing is not None:
            if existing.upstream == proxy.upstream and _same_listen(existing.listen, proxy.listen):
                return existing
            await existing.stop()
            del self.proxies[proxy.name]
        if enabled:
            await proxy.start()
        self.proxies[proxy.name] = proxy
        return proxy

    async def remove(self, name: str) -> None:
        proxy = self.get(name)
        await proxy.stop()
        self.proxies.pop(name, None)

    async def clear(self) -> None:
        for name in list(self.proxies):
            await self.remove(name)


def _same_listen(current: str, wanted: str) -> bool:
    try:
        return split_address(current) == split_address(wanted)
    except ValueError:
        return False


__all__ = ["ApiError", "Connection", "Link", "Proxy", "ProxyCollection", "ToxicWrapper"]
