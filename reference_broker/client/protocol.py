"""Protocol-level asyncio Kafka client: one TCP connection, any request, any version.

Why it exists: conformance checks must send exactly the request they mean (any API key, any version,
even malformed bytes) and time the answer exactly (e.g. a parked Fetch released at max_wait). So this
layer does no retries, no version guessing and no metadata: it encodes a ``kafka.protocol`` message,
writes it, matches the answer by correlation id, decodes it and reports the round-trip time measured
with ``time.monotonic_ns``. Several requests may be in flight at once (pipelining); responses are
matched by correlation id, not by order, so a broker answering out of order is visible, not hidden.

Wire format comes from kafka-python 3's ``kafka.protocol`` (Kafka's JSON schemas); no hand-written
codecs. ``ApiVersionsResponse`` always has a v0 (non-flexible) header; the library's
``ApiVersionsResponse.decode`` already knows this.

Raw mode for malformed-input tests: :meth:`Connection.send_raw` writes bytes verbatim; frames the broker
sends that match no pending request are queued for :meth:`Connection.read_unmatched_frame`;
:meth:`Connection.wait_closed` reports the broker closing the connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import struct
import time
from dataclasses import dataclass, field
from typing import Any

import kafka.errors as Errors
import kafka.protocol.admin  # noqa: F401  (registers request/response classes)
import kafka.protocol.consumer  # noqa: F401
import kafka.protocol.metadata  # noqa: F401
import kafka.protocol.producer  # noqa: F401
from kafka.protocol.api_message import ApiMessage
from kafka.protocol.metadata import ApiVersionsRequest

__all__ = [
    "Connection",
    "ConnectionClosedError",
    "RawFrame",
    "Response",
    "encode_request",
    "negotiate_versions",
    "request_class",
    "response_class",
]

DEFAULT_CLIENT_ID = "reference-client"
_MAX_FRAME = 256 * 1024 * 1024


class ConnectionClosedError(Errors.KafkaConnectionError):
    """The broker (or we) closed the connection; pending requests fail with this."""


@dataclass(frozen=True)
class Response:
    """A decoded response with its timing.

    ``rtt_ns`` = ``received_ns - sent_ns`` (monotonic clock): sent is taken just before the request bytes
    are handed to the transport, received when the last byte of the response frame has been read.
    ``body`` is None for requests that get no response (Produce with acks=0).
    """

    correlation_id: int
    api_key: int
    api_version: int
    body: Any
    sent_ns: int
    received_ns: int

    @property
    def rtt_ns(self) -> int:
        return self.received_ns - self.sent_ns


@dataclass(frozen=True)
class RawFrame:
    """A response frame that matched no pending request (raw mode); ``payload`` excludes the size prefix."""

    correlation_id: int | None
    payload: bytes
    received_ns: int


def _all_message_classes() -> list[type[ApiMessage]]:
    out: list[type[ApiMessage]] = []
    todo = list(ApiMessage.__subclasses__())
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        if getattr(cls, "_class_version", None) is None and getattr(cls, "_json", None) is not None:
            out.append(cls)
    return out


_REQUESTS: dict[int, type[ApiMessage]] = {}
_RESPONSES: dict[int, type[ApiMessage]] = {}


def _scan() -> None:
    for cls in _all_message_classes():
        (_REQUESTS if cls.is_request() else _RESPONSES).setdefault(cls.API_KEY, cls)


_scan()


def request_class(api_key: int) -> type[ApiMessage]:
    """The ``kafka.protocol`` request class for an API key (KeyError if no schema is loaded for it).

    Message classes defined after this module was imported (e.g. the reference controller's own RPC schemas)
    are found by a rescan on first use."""
    if api_key not in _REQUESTS:
        _scan()
    return _REQUESTS[api_key]


def response_class(api_key: int) -> type[ApiMessage]:
    """The ``kafka.protocol`` response class for an API key (rescanned like :func:`request_class`)."""
    if api_key not in _RESPONSES:
        _scan()
    return _RESPONSES[api_key]


def encode_request(
    request: ApiMessage, version: int | None = None, correlation_id: int = 0, client_id: str = DEFAULT_CLIENT_ID
) -> bytes:
    """Frame a request (size prefix + request header + body) so a test can send it, or mangle it first."""
    if version is not None:
        request.API_VERSION = version
    if request.API_VERSION is None:
        raise ValueError("request version required (pass version= or use a versioned class, e.g. FetchRequest[12])")
    request.with_header(correlation_id=correlation_id, client_id=client_id)
    return bytes(request.encode(header=True, framed=True))


def negotiate_versions(
    broker_versions: dict[int, tuple[int, int]], keys: list[int] | None = None
) -> dict[int, int]:
    """Highest version per API key that both the broker and kafka-python support.

    ``broker_versions`` maps api_key -> (min, max) from ApiVersions. Keys with no overlap are omitted, so
    ``key in result`` answers "can we talk this API at all".
    """
    out: dict[int, int] = {}
    for key, (bmin, bmax) in broker_versions.items():
        if keys is not None and key not in keys:
            continue
        cls = _REQUESTS.get(key)
        if cls is None or cls.max_version is None:
            continue
        v = min(bmax, cls.max_version)
        if v >= bmin:
            out[key] = v
    return out


@dataclass
class _Pending:
    api_key: int
    api_version: int
    response_cls: type[ApiMessage]
    sent_ns: int
    future: asyncio.Future[Response] = field(repr=False)


class Connection:
    """One TCP connection to one broker. Create with :meth:`connect`; use as an async context manager.

    Not thread-safe; use from one event loop.
    """

    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, host: str, port: int, client_id: str
    ) -> None:
        self.host = host
        self.port = port
        self.client_id = client_id
        self._reader = reader
        self._writer = writer
        self._correlation = itertools.count(1)
        self._pending: dict[int, _Pending] = {}
        self._unmatched: asyncio.Queue[RawFrame] = asyncio.Queue()
        self._closed = asyncio.Event()
        self._close_reason: BaseException | None = None
        self._closed_ns: int | None = None
        #: api_key -> (min, max) advertised by the broker, filled by :meth:`api_versions`
        self.broker_versions: dict[int, tuple[int, int]] = {}
        #: feature name -> finalized level (ApiVersions v3+, KIP-584; e.g. transaction.version) and their epoch
        self.finalized_features: dict[str, int] = {}
        self.finalized_features_epoch = -1
        #: api_key -> version chosen by :func:`negotiate_versions`
        self.versions: dict[int, int] = {}
        self._read_task = asyncio.get_running_loop().create_task(self._read_loop())

    @classmethod
    async def connect(
        cls, host: str, port: int, *, client_id: str = DEFAULT_CLIENT_ID, timeout: float = 10.0
    ) -> Connection:
        """Open the TCP connection (no handshake; call :meth:`api_versions` to negotiate)."""
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
        return cls(reader, writer, host, port, client_id)

    async def __aenter__(self) -> Connection:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- sending -------------------------------------------------------------------------------------------

    def next_correlation_id(self) -> int:
        """Reserve a correlation id (for hand-built frames sent with :meth:`send_frame`)."""
        return next(self._correlation) & 0x7FFFFFFF

    def submit(self, request: ApiMessage, version: int | None = None) -> asyncio.Future[Response]:
        """Write a request now and return a future for its response (pipelining: submit several, then await).

        The version is ``version``, else the one already on the request (``FetchRequest[12](...)``),
        else the negotiated one for its key.
        """
        if version is None:
            version = request.API_VERSION
        if version is None:
            version = self.versions.get(request.API_KEY)
        if version is None:
            raise ValueError(f"no version for api_key {request.API_KEY}: pass version= or negotiate first")
        cid = self.next_correlation_id()
        frame = encode_request(request, version, cid, self.client_id)
        return self._write(frame, cid, request.API_KEY, version, expect_response=request.expect_response())

    async def request(self, request: ApiMessage, version: int | None = None, timeout: float | None = 30.0) -> Response:
        """Send one request and await its decoded response (see :meth:`submit`)."""
        fut = self.submit(request, version)
        # asyncio.timeout, not wait_for: on Python 3.11 wait_for can swallow a cancellation that races the answer
        # (gh-86296), so a loop cancelled at stop() would go on and the node's shutdown would hang.
        async with asyncio.timeout(timeout):
            return await fut

    def send_frame(
        self, frame: bytes, correlation_id: int, api_key: int, api_version: int, expect_response: bool = True
    ) -> asyncio.Future[Response]:
        """Write a pre-built (possibly altered) frame and decode the answer as ``api_key``/``api_version``."""
        return self._write(frame, correlation_id, api_key, api_version, expect_response)

    async def send_raw(self, data: bytes) -> None:
        """Write bytes verbatim (no framing, no bookkeeping): for malformed-input tests."""
        self._check_open()
        self._writer.write(data)
        await self._writer.drain()

    def _write(
        self, frame: bytes, cid: int, api_key: int, version: int, expect_response: bool
    ) -> asyncio.Future[Response]:
        self._check_open()
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[Response] = loop.create_future()
        if expect_response:
            if cid in self._pending:
                raise ValueError(f"correlation id {cid} already in flight")
            sent_ns = time.monotonic_ns()
            self._pending[cid] = _Pending(api_key, version, response_class(api_key), sent_ns, fut)
            self._writer.write(frame)
        else:
            sent_ns = time.monotonic_ns()
            self._writer.write(frame)
            fut.set_result(Response(cid, api_key, version, None, sent_ns, sent_ns))
        return fut

    def _check_open(self) -> None:
        if self._closed.is_set() or self._writer.is_closing():
            raise ConnectionClosedError(f"connection to {self.host}:{self.port} is closed") from self._close_reason

    # -- receiving -----------------------------------------------------------------------------------------

    async def _read_loop(self) -> None:
        reason: BaseException | None = None
        try:
            while True:
                size_bytes = await self._reader.readexactly(4)
                (size,) = struct.unpack(">i", size_bytes)
                if size < 0 or size > _MAX_FRAME:
                    raise Errors.InvalidReceiveError(f"invalid frame length {size}")
                payload = await self._reader.readexactly(size)
                received_ns = time.monotonic_ns()
                self._dispatch(payload, received_ns)
        except (asyncio.IncompleteReadError, ConnectionError, OSError) as exc:
            reason = exc
        except asyncio.CancelledError:
            reason = ConnectionClosedError("closed by client")
        except Exception as exc:  # a decoding bug must not leave futures hanging
            reason = exc
        finally:
            self._mark_closed(reason)

    def _dispatch(self, payload: bytes, received_ns: int) -> None:
        cid = struct.unpack_from(">i", payload, 0)[0] if len(payload) >= 4 else None
        pending = self._pending.pop(cid, None) if cid is not None else None
        if pending is None:
            self._unmatched.put_nowait(RawFrame(cid, payload, received_ns))
            return
        try:
            body = pending.response_cls.decode(payload, version=pending.api_version, header=True)
        except Exception as exc:  # decode failure is the test's business, not the connection's
            if not pending.future.done():
                pending.future.set_exception(
                    Errors.KafkaProtocolError(f"cannot decode api_key {pending.api_key} v{pending.api_version}: {exc!r}")
                )
            return
        if not pending.future.done():
            pending.future.set_result(
                Response(cid, pending.api_key, pending.api_version, body, pending.sent_ns, received_ns)
            )

    def _mark_closed(self, reason: BaseException | None) -> None:
        if self._closed.is_set():
            return
        self._close_reason = reason
        self._closed_ns = time.monotonic_ns()
        self._closed.set()
        err = ConnectionClosedError(f"connection to {self.host}:{self.port} closed: {reason!r}")
        for p in self._pending.values():
            if not p.future.done():
                p.future.set_exception(err)
        self._pending.clear()
        with contextlib.suppress(Exception):
            self._writer.close()

    async def read_unmatched_frame(self, timeout: float | None = 5.0) -> RawFrame:
        """Next frame that matched no pending request (raw mode). Raises TimeoutError if none arrives."""
        return await asyncio.wait_for(self._unmatched.get(), timeout)

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    @property
    def closed_ns(self) -> int | None:
        """Monotonic time at which the close was noticed (None while open)."""
        return self._closed_ns

    async def wait_closed(self, timeout: float | None = 5.0) -> bool:
        """True once the connection is closed (e.g. the broker hung up); False if still open after timeout."""
        try:
            await asyncio.wait_for(self._closed.wait(), timeout)
        except TimeoutError:
            return False
        return True

    @property
    def in_flight(self) -> int:
        return len(self._pending)

    async def close(self) -> None:
        """Close the socket; pending requests fail with :class:`ConnectionClosedError`."""
        self._read_task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self._read_task
        self._mark_closed(ConnectionClosedError("closed by client"))
        with contextlib.suppress(Exception):
            await self._writer.wait_closed()

    # -- negotiation ---------------------------------------------------------------------------------------

    async def api_versions(self, version: int | None = None, timeout: float = 10.0) -> dict[int, int]:
        """Ask ApiVersions, store ``broker_versions`` and return the negotiated ``versions``.

        Starts at the library's highest ApiVersions version; if the broker answers UNSUPPORTED_VERSION (in a
        v0 body, per KIP-511) it retries once at the highest ApiVersions version the broker listed.
        """
        v = ApiVersionsRequest.max_version if version is None else version
        resp = await self.request(_api_versions_request(v), v, timeout)
        body = resp.body
        if body.error_code == Errors.UnsupportedVersionError.errno and version is None:
            ranges = {k.api_key: (k.min_version, k.max_version) for k in body.api_keys}
            if 18 in ranges:
                v = min(ranges[18][1], ApiVersionsRequest.max_version)
                resp = await self.request(_api_versions_request(v), v, timeout)
                body = resp.body
        if body.error_code != 0:
            raise Errors.for_code(body.error_code)(f"ApiVersions v{v} failed")
        self.broker_versions = {k.api_key: (k.min_version, k.max_version) for k in body.api_keys}
        self.versions = negotiate_versions(self.broker_versions)
        if v >= 3:
            self.finalized_features = {f.name: f.max_version_level for f in body.finalized_features or []}
            self.finalized_features_epoch = body.finalized_features_epoch
        return self.versions


def _api_versions_request(version: int) -> ApiMessage:
    if version >= 3:
        return ApiVersionsRequest[version](client_software_name="reference-client", client_software_version="0.1")
    return ApiVersionsRequest[version]()
