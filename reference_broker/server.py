"""The asyncio TCP server: framing, header parsing, dispatch by API key, response framing.

Per connection, requests are handled one at a time in arrival order, as Kafka's network processor does (it mutes
a channel while a request is in flight). A parked Fetch therefore holds its own connection, not the broker.

Bad input never crashes the broker and never touches stored data:
- a frame size < 0 or above ``socket.request.max.bytes``, a truncated frame, an unknown API key, an unsupported
  version (except ApiVersions) or an undecodable request closes that connection (Kafka's InvalidRequestException /
  InvalidReceiveException path);
- an unsupported ApiVersions version is answered with v0 UNSUPPORTED_VERSION and the supported ranges (KIP-511).
"""
from __future__ import annotations

import asyncio
import io
import logging
import socket
import struct
from typing import Any

from kafka.protocol.api_header import RequestHeader

from .context import RequestContext
from .registry import BROKER, CloseConnection, Registry

log = logging.getLogger("reference_broker.server")

API_VERSIONS_KEY = 18
JOIN_GROUP_KEY = 11
_I32 = struct.Struct(">i")
_REQ_PREFIX = struct.Struct(">hhi")


class ProtocolViolation(Exception):
    """The peer sent something Kafka would close the connection for."""


class Server:
    """Serves one registry's handlers for one node (a broker node or the controller) on one listener."""

    def __init__(self, node: Any, registry: Registry = BROKER) -> None:
        self.node = node
        self.registry = registry
        self._server: asyncio.base_events.Server | None = None
        self._sock: socket.socket | None = None
        self._conns: dict[asyncio.StreamWriter, None] = {}
        registry.load_all()

    async def start(self, host: str, port: int) -> int:
        """Listen; return the bound port (``port`` 0 picks a free one)."""
        port = await self.bind(host, port)
        await self.open()
        return port

    async def bind(self, host: str, port: int) -> int:
        """Take the address without listening yet; return the bound port. A connection attempt is refused until
        :meth:`open`, so "the port accepts connections" means "requests are served" (Kafka's ``Acceptor`` opens a
        fixed port only when request processing is enabled, after the broker is unfenced)."""
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                                             flags=socket.AI_PASSIVE)
        family, kind, proto, _name, addr = infos[0]
        sock = socket.socket(family, kind, proto)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(addr)
        except OSError:
            sock.close()
            raise
        self._sock = sock
        return sock.getsockname()[1]

    async def open(self) -> None:
        """Listen on the bound address and serve requests."""
        assert self._sock is not None, "bind() first"
        sock, self._sock = self._sock, None
        self._server = await asyncio.start_server(self._serve, sock=sock, limit=1 << 20)

    async def stop(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        if self._server is not None:
            self._server.close()
        for w in list(self._conns):
            w.close()
        if self._server is not None:
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        host, port = writer.get_extra_info("peername")[:2]
        peer = f"{host}:{port}"
        self._conns[writer] = None
        max_size = self.node.config["socket.request.max.bytes"]
        try:
            while True:
                try:
                    size_bytes = await reader.readexactly(4)
                except asyncio.IncompleteReadError as e:
                    if e.partial:
                        log.warning("%s: connection closed inside a frame size (%d bytes)", peer, len(e.partial))
                    return
                (size,) = _I32.unpack(size_bytes)
                if size < 0 or size > max_size:
                    raise ProtocolViolation(f"frame size {size} outside 0..socket.request.max.bytes={max_size}")
                try:
                    payload = await reader.readexactly(size)
                except asyncio.IncompleteReadError as e:
                    log.warning("%s: truncated frame: %d of %d bytes", peer, len(e.partial), size)
                    return
                out = await self._dispatch_watched(payload, peer, reader)
                if out is not None:
                    writer.write(out)
                    await writer.drain()
        except (ProtocolViolation, CloseConnection) as e:
            log.warning("%s: closing connection: %s", peer, e)
        except (ConnectionError, asyncio.CancelledError):
            pass
        except Exception:  # a handler bug: close this connection, keep serving everyone else
            log.exception("%s: internal error; closing connection", peer)
        finally:
            self._conns.pop(writer, None)
            writer.close()

    async def _dispatch_watched(self, payload: bytes, peer: str, reader: asyncio.StreamReader) -> bytes | None:
        """Dispatch; only under the test-only switch group.abandoned_leader_kept is a parked JoinGroup watched for
        its connection closing, so the coordinator can (wrongly) keep the departed leader: the wedge of
        GROUP-JOIN-ABANDONED. Kafka, like the normal path here, does not look at the connection at all."""
        faults = getattr(self.node, "faults", None)
        if (faults is None or not faults.on("group.abandoned_leader_kept") or len(payload) < _REQ_PREFIX.size
                or _REQ_PREFIX.unpack_from(payload)[0] != JOIN_GROUP_KEY):
            return await self._dispatch(payload, peer)
        work = asyncio.ensure_future(self._dispatch(payload, peer))
        while not work.done():
            await asyncio.wait([work], timeout=0.02)
            if not work.done() and reader.at_eof():
                version = _REQ_PREFIX.unpack_from(payload)[1]
                handler = self.registry.handlers[JOIN_GROUP_KEY]
                bio = io.BytesIO(payload)
                RequestHeader.decode(bio, flexible=handler.request_cls.flexible_version_q(version))
                req = handler.request_cls.decode(memoryview(payload)[bio.tell():], version=version)
                self.node.groups.join_abandoned(req.group_id, req.member_id)
                return await work
        return work.result()

    async def _dispatch(self, payload: bytes, peer: str) -> bytes | None:
        if len(payload) < _REQ_PREFIX.size:
            raise ProtocolViolation(f"request of {len(payload)} bytes is shorter than a request header")
        api_key, api_version, correlation_id = _REQ_PREFIX.unpack_from(payload)
        handler = self.registry.handlers.get(api_key)
        if handler is None:
            raise ProtocolViolation(f"unknown API key {api_key}")
        if not handler.supports(api_version):
            if api_key == API_VERSIONS_KEY:
                from .apis.api_versions import unsupported_version_response
                return frame(correlation_id, unsupported_version_response(self.registry), 0, flexible=False)
            raise ProtocolViolation(
                f"{handler.name} v{api_version} unsupported (served: v{handler.min_version}-v{handler.max_version})")
        flexible = handler.request_cls.flexible_version_q(api_version)
        try:
            bio = io.BytesIO(payload)
            header = RequestHeader.decode(bio, flexible=flexible)
            request = handler.request_cls.decode(memoryview(payload)[bio.tell():], version=api_version)
        except Exception as e:  # the codec raises many types on garbage
            raise ProtocolViolation(f"cannot decode {handler.name} v{api_version}: {type(e).__name__}: {e}") from None
        if log.isEnabledFor(logging.DEBUG):  # --log-level DEBUG: which client speaks which version of what
            log.debug("%s v%d from %s (%s)", handler.name, api_version, header.client_id, peer)
        ctx = RequestContext(self.node, self.registry, api_key, api_version, correlation_id, header.client_id, peer,
                             self.node.clock.monotonic())
        response = await handler.fn(ctx, request)
        if response is None:  # e.g. Produce with acks=0
            return None
        # ApiVersions responses always use header v0 (KIP-511), whatever the body's version.
        return frame(correlation_id, response, api_version, flexible=flexible and api_key != API_VERSIONS_KEY)


def frame(correlation_id: int, response: Any, version: int, *, flexible: bool) -> bytes:
    """Size-prefixed response: header (correlation id, + empty tagged fields when flexible) then body.

    The body is encoded by kafka.protocol; the header is written here because kafka-python 3.0.12's
    ``encode(header=True)`` assumes a request header for responses.
    """
    body = response.encode(version=version)
    header = _I32.pack(correlation_id) + (b"\x00" if flexible else b"")
    return _I32.pack(len(header) + len(body)) + header + bytes(body)
