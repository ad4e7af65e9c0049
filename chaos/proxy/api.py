"""Toxiproxy's HTTP API over asyncio: one flat route table, JSON shapes and error answers as in api.go.

Deliberate differences from Toxiproxy: an unknown toxic attribute is a 400 (Toxiproxy ignores it silently, which
hides typos in a fault that then never fires); proxies listen on loopback only unless the server was started
with loopback_only=False; the extra toxic type `kafka` (chaos/proxy/toxics/kafka.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import dataclasses
import json
import logging
import types
import typing
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import unquote, urlsplit

from . import errors as E
from .errors import ApiError, render
from .server import STREAMS, ProxyCollection, ToxicWrapper
from .toxics import REGISTRY, Toxic

log = logging.getLogger("chaos.proxy.api")

VERSION = "2.12.0-kct"
MAX_BODY = 1 << 20
MAX_HEADERS = 100
IDLE_TIMEOUT = 60.0

Answer = tuple[int, Any]  # (status, JSON-able body or None for an empty body)
Handler = Callable[[ProxyCollection, dict[str, str], bytes], Awaitable[Answer]]


# ----------------------------------------------------------------------------------------------- JSON input
def _decode(body: bytes) -> Any:
    """Decode a request body like Go's json.Decoder: errors become 400 "bad request body: ..."."""
    text = body.decode("utf-8", errors="replace").strip()
    if not text:
        raise E.BAD_REQUEST_BODY.joined("EOF")
    try:
        value, _ = json.JSONDecoder().raw_decode(text)  # like Go's Decoder: one value, the rest ignored
    except (ValueError, RecursionError) as e:
        raise E.BAD_REQUEST_BODY.joined(str(e)) from None
    return value


def _go_type(value: Any) -> str:
    return {bool: "bool", str: "string", dict: "object", list: "array", type(None): "null"}.get(
        type(value), "number")


def _field(obj: dict[str, Any], key: str, kind: type, where: str) -> Any:
    """obj[key] if present and of `kind` (null counts as absent, as in Go); else 400."""
    value = obj.get(key)
    if value is None:
        return None
    ok = isinstance(value, kind) and not (kind in (int, float) and isinstance(value, bool))
    if kind is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not ok:
        raise E.BAD_REQUEST_BODY.joined(
            f"json: cannot unmarshal {_go_type(value)} into Go struct field {where}.{key} of type "
            f"{ {str: 'string', bool: 'bool', float: 'float32', int: 'int64'}[kind] }")
    return value


def _object(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise E.BAD_REQUEST_BODY.joined(f"json: cannot unmarshal {_go_type(value)} into Go value of type {what}")
    return value


def _check_attr(value: Any, hint: Any) -> bool:
    if value is None:
        return hint is type(None) or (typing.get_origin(hint) in (typing.Union, types.UnionType)
                                      and type(None) in typing.get_args(hint))
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return any(_check_attr(value, h) for h in typing.get_args(hint) if h is not type(None))
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if typing.get_origin(hint) is list:
        (item,) = typing.get_args(hint)
        return isinstance(value, list) and all(_check_attr(v, item) for v in value)
    return isinstance(value, hint)


def _attributes(toxic: Toxic, attrs: Any) -> Toxic:
    """A copy of `toxic` with `attrs` applied (only known fields, right types), validated; else 400."""
    if attrs is None:
        attrs = {}
    attrs = _object(attrs, "attributes")
    hints = typing.get_type_hints(type(toxic))
    names = {f.name for f in dataclasses.fields(toxic) if not f.name.startswith("_")}  # type: ignore[arg-type]
    out = copy.copy(toxic)
    for key, value in attrs.items():
        if key not in names:
            raise E.BAD_REQUEST_BODY.joined(f'json: unknown field "{key}" for toxic type {toxic.type}')
        if not _check_attr(value, hints[key]):
            raise E.BAD_REQUEST_BODY.joined(
                f"json: cannot unmarshal {_go_type(value)} into Go struct field .attributes.{key}")
        setattr(out, key, value)
    try:
        out.validate()
    except (ValueError, TypeError) as e:
        raise E.BAD_REQUEST_BODY.joined(str(e)) from None
    return out


# ----------------------------------------------------------------------------------------------- handlers
async def reset_state(c: ProxyCollection, p: dict[str, str], body: bytes) -> Answer:
    for proxy in list(c.proxies.values()):
        await proxy.start()
        proxy.reset_toxics()
    return 204, None


async def proxy_index(c: ProxyCollection, p: dict[str, str], body: bytes) -> Answer:
    return 200, {name: proxy.to_json() for name, proxy in c.proxies.items()}


def _proxy_input(obj: dict[str, Any], where: str = "Proxy") -> tuple[str, str, str, bool | None]:
    name = _field(obj, "name", str, where) or ""
    listen = _field(obj, "listen", str, where) or ""
    upstream = _field(obj, "upstream", str, where) or ""
    enabled = _field(obj, "enabled", bool, where)
    return name, listen, upstream, enabled


async def proxy_create(c: ProxyCollection, p: dict[str, str], body: bytes) -> Answer:
    name, listen, upstream, enabled = _proxy_input(_object(_decode(body), "toxiproxy.Proxy"))
    if not name:
        raise E.MISSING_FIELD.joined("name")
    if not upstream:
        raise E.MISSING_FIELD.joined("upstream")
    proxy = c.new_proxy(name, listen, upstream)
    await c.add(proxy, True if enabled is None else enabled)
    return 201, proxy.to_json()


async def populate(c: ProxyCollection, p: dict[str, str], body: bytes) -> Answer:
    value = _decode(body)
    if not isinstance(value, list):
        raise E.BAD_REQUEST_BODY.joined(
            f"json: cannot unmarshal {_go_type(value)} into Go value of type []struct {{ toxiproxy.Proxy }}")
    inputs = []
    for i, item in enumerate(value):
        name, listen, upstream, enabled = _proxy_input(_object(item, "struct { toxiproxy.Proxy }"))
        if not name:
            raise E.MISSING_FIELD.joined(f"name at proxy {i + 1}")
        if not upstream:
            raise E.MISSING_FIELD.joined(f"upstream at proxy {i + 1}")
        inputs.append((name, listen, upstream, True if enabled is None else enabled))
    done: list[dict[str, Any]] = []
    for name, listen, upstream, enabled in inputs:
        try:
            proxy = await c.add_or_replace(c.new_proxy(name, listen, upstream), enabled)
        except ApiError as e:
            return e.status, {**e.body(), "proxies": done or None}
        done.append(proxy.to_json())
    return 201, {"proxies": done or None}  # Go marshals an empty slice built by append as null


async def proxy_show(c: ProxyCollection, p: dict[str, str], body: bytes) -> Answer:
    return 200, c.get(p["proxy"]).to_json()


async def proxy_update(c: ProxyCollection, p: dict[str, str], body: bytes) -> Answer:
    proxy = c.get(p["proxy"])
    _, listen, upstream, enabled = _proxy_input(_object(_decode(body), "toxiproxy.Proxy"))
    await proxy.update(listen if listen is not None and listen != "" else proxy.listen,
                       upstream or proxy.upstream, proxy.enabled if enabled is None else enabled)
    return 200, proxy.to_json()


async def proxy_delete(c: ProxyCollection, p: dict[str, str], body: bytes) -> Answer:
    await c.remove(p["proxy"])
    return 204, None


async def toxic_index(c: ProxyCollection, p: dict[str, str], body: bytes) -> Answer:
    return 200, [w.to_json() for w in c.get(p["proxy"]).toxics()]


async def toxic_create(c: ProxyCollection, p: dict[str, str], body: bytes) -> Answer:
    proxy = c.get(p["proxy"])
    obj = _object(_decode(body), "toxics.ToxicWrapper")
    name = _field(obj, "name", str, "ToxicWrapper") or ""
    type_ = _field(obj, "type", str, "ToxicWrapper") or ""
    cls = REGISTRY.get(type_)
    stream = _field(obj, "stream", str, "ToxicWrapper")
    toxicity = _field(obj, "toxicity", float, "ToxicWrapper")
    stream = (stream if stream is not None else cls.default_stream if cls else "downstream").lower()
    if stream not in STREAMS:
        raise E.INVALID_STREAM
    if not name:
        name = f"{type_}_{stream}"
    if cls is None:
        raise E.INVALID_TOXIC_TYPE
    if proxy.get_toxic(name) is not None:
        raise E.TOXIC_ALREADY_EXISTS
    toxic = _attributes(cls(), obj.get("attributes"))
    check = getattr(toxic, "check_stream", None)
    if check is not None:
        check(stream)
    wrapper = ToxicWrapper(name, type_, stream, 1.0 if toxicity is None else float(toxicity), toxic)
    proxy.add_toxic(wrapper)
    return 200, wrapper.to_json()


def _toxic(c: ProxyCollection, p: dict[str, str]) -> tuple[Any, ToxicWrapper]:
    proxy = c.get(p["proxy"])
    wrapper = proxy.get_toxic(p["toxic"])
    if wrapper is None:
        raise E.TOXIC_NOT_FOUND
    return proxy, wrapper


async def toxic_show(c: ProxyCollection, p: dict[str, str], body: bytes) -> Answer:
    return 200, _toxic(c, p)[1].to_json()


async def toxic_update(c: ProxyCollection, p: dict[str, str], body: bytes) -> Answer:
    proxy, wrapper = _toxic(c, p)
    obj = _object(_decode(body), "struct { Attributes interface {}; Toxicity float32 }")
    toxicity = _field(obj, "toxicity", float, "ToxicWrapper")
    wrapper.toxic = _attributes(wrapper.toxic, obj.get("attributes"))
    if toxicity is not None:
        wrapper.toxicity = float(toxicity)
    proxy.update_toxic(wrapper)
    return 200, wrapper.to_json()


async def toxic_delete(c: ProxyCollection, p: dict[str, str], body: bytes) -> Answer:
    proxy, wrapper = _toxic(c, p)
    proxy.remove_toxic(wrapper)
    return 204, None


async def version(c: ProxyCollection, p: dict[str, str], body: bytes) -> Answer:
    return 200, {"version": VERSION}


ROUTES: list[tuple[str, str, Handler]] = [
    ("POST", "/reset", reset_state),
    ("GET", "/proxies", proxy_index),
    ("POST", "/proxies", proxy_create),
    ("POST", "/populate", populate),
    ("GET", "/proxies/{proxy}", proxy_show),
    ("POST", "/proxies/{proxy}", proxy_update),
    ("PATCH", "/proxies/{proxy}", proxy_update),
    ("DELETE", "/proxies/{proxy}", proxy_delete),
    ("GET", "/proxies/{proxy}/toxics", toxic_index),
    ("POST", "/proxies/{proxy}/toxics", toxic_create),
    ("GET", "/proxies/{proxy}/toxics/{toxic}", toxic_show),
    ("POST", "/proxies/{proxy}/toxics/{toxic}", toxic_update),
    ("PATCH", "/proxies/{proxy}/toxics/{toxic}", toxic_update),
    ("DELETE", "/proxies/{proxy}/toxics/{toxic}", toxic_delete),
    ("GET", "/version", version),
]


def match(method: str, path: str) -> tuple[Handler | None, dict[str, str], bool]:
    """(handler, path params, path matched some route) for a request; gorilla/mux-style one-segment params."""
    parts = path.split("/")
    path_seen = False
    for m, pattern, handler in ROUTES:
        pparts = pattern.split("/")
        if len(pparts) != len(parts):
            continue
        params: dict[str, str] = {}
        for pp, seg in zip(pparts, parts, strict=True):
            if pp.startswith("{"):
                if not seg:
                    break
                params[pp[1:-1]] = unquote(seg)
            elif pp != seg:
                break
        else:
            path_seen = True
            if m == method:
                return handler, params, True
    return None, {}, path_seen


async def dispatch(c: ProxyCollection, method: str, target: str, headers: dict[str, str],
                   body: bytes) -> tuple[int, bytes, str]:
    """One request -> (status, body bytes, content type). Never raises: a bug answers 500 and is logged."""
    if headers.get("user-agent", "").startswith("Mozilla/"):
        return 403, b"User agent not allowed\n", "text/plain; charset=utf-8"
    path = urlsplit(target).path or "/"
    handler, params, path_seen = match(method, path)
    if handler is None:
        if path_seen:
            return 405, b"", "text/plain; charset=utf-8"
        return 404, b"404 page not found\n", "text/plain; charset=utf-8"
    try:
        status, obj = await handler(c, params, body)
    except ApiError as e:
        status, data = render(e)
        return status, data + b"\n", "application/json"
    except Exception as e:  # noqa: BLE001 - the API must answer, never die; Toxiproxy answers such errors 500
        log.exception("API handler %s %s failed", method, path)
        status, data = render(ApiError(f"internal error: {type(e).__name__}: {e}", 500))
        return status, data + b"\n", "application/json"
    if obj is None:
        return status, b"", "text/plain; charset=utf-8"
    ctype = "application/json;charset=utf-8" if handler is version else "application/json"
    return status, json.dumps(obj).encode() + (b"\n" if handler is version else b""), ctype


# ----------------------------------------------------------------------------------------------- HTTP/1.1
_REASONS = {200: "OK", 201: "Created", 204: "No Content", 400: "Bad Request", 403: "Forbidden",
            404: "Not Found", 405: "Method Not Allowed", 409: "Conflict", 413: "Request Entity Too Large",
            500: "Internal Server Error"}


class HttpError(Exception):
    """A request we cannot parse: answered with `status` and the connection closed."""

    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


async def _read_request(reader: asyncio.StreamReader) -> tuple[str, str, str, dict[str, str], bytes] | None:
    line = await reader.readline()
    if not line:
        return None
    try:
        method, target, version = line.decode("latin-1").split()
    except ValueError:
        raise HttpError(400) from None
    headers: dict[str, str] = {}
    for _ in range(MAX_HEADERS + 1):
        hline = await reader.readline()
        if hline in (b"\r\n", b"\n", b""):
            break
        key, sep, value = hline.decode("latin-1").partition(":")
        if not sep:
            raise HttpError(400)
        headers[key.strip().lower()] = value.strip()
    else:
        raise HttpError(400)
    body = b""
    if "chunked" in headers.get("transfer-encoding", "").lower():
        parts = []
        total = 0
        while True:
            size_line = await reader.readline()
            try:
                size = int(size_line.split(b";")[0].strip(), 16)
            except ValueError:
                raise HttpError(400) from None
            if size == 0:
                while (await reader.readline()) not in (b"\r\n", b"\n", b""):
                    pass
                break
            total += size
            if total > MAX_BODY:
                raise HttpError(413)
            parts.append(await reader.readexactly(size))
            await reader.readline()
        body = b"".join(parts)
    elif "content-length" in headers:
        try:
            length = int(headers["content-length"])
        except ValueError:
            raise HttpError(400) from None
        if length < 0:
            raise HttpError(400)
        if length > MAX_BODY:
            raise HttpError(413)
        body = await reader.readexactly(length)
    return method, target, version, headers, body


def _response(status: int, body: bytes, ctype: str, keep_alive: bool) -> bytes:
    head = [f"HTTP/1.1 {status} {_REASONS.get(status, 'Status')}", f"Content-Length: {len(body)}"]
    if status != 204 or body:
        head.append(f"Content-Type: {ctype}")
    head.append("Connection: keep-alive" if keep_alive else "Connection: close")
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


class ApiServer:
    """The HTTP listener for a ProxyCollection; each API connection served until it closes or idles."""

    def __init__(self, collection: ProxyCollection) -> None:
        self.collection = collection
        self._server: asyncio.Server | None = None
        self._conns: set[asyncio.Task[None]] = set()
        self._lock = asyncio.Lock()  # one API change at a time, as Toxiproxy's collection lock

    async def listen(self, host: str, port: int) -> tuple[str, int]:
        self._server = await asyncio.start_server(self._serve, host, port, reuse_address=True)
        sockname = self._server.sockets[0].getsockname()
        return sockname[0], sockname[1]

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        for t in list(self._conns):
            t.cancel()
        if self._conns:
            await asyncio.wait(list(self._conns), timeout=2.0)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._conns.add(task)
        try:
            while True:
                try:
                    req = await asyncio.wait_for(_read_request(reader), IDLE_TIMEOUT)
                except HttpError as e:
                    writer.write(_response(e.status, f"{_REASONS.get(e.status, '')}\n".encode(),
                                           "text/plain; charset=utf-8", False))
                    break
                if req is None:
                    break
                method, target, version, headers, body = req
                keep = version.upper() == "HTTP/1.1" and headers.get("connection", "").lower() != "close"
                async with self._lock:
                    status, data, ctype = await dispatch(self.collection, method, target, headers, body)
                writer.write(_response(status, data, ctype, keep))
                await writer.drain()
                if not keep:
                    break
        except (TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError,
                ConnectionError, asyncio.CancelledError):
            pass
        finally:
            self._conns.discard(task)
            with contextlib.suppress(Exception):
                writer.close()
