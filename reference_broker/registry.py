"""Handler registry: each API module registers itself with the versions it serves.

ApiVersions is built from this table, so the broker advertises exactly what is implemented. Duplicate
registration is a programming error and fails at import time.
"""
from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

HandlerFn = Callable[[Any, Any], Awaitable[Any]]


@dataclass(frozen=True)
class Handler:
    api_key: int
    name: str
    min_version: int
    max_version: int
    request_cls: Any
    response_cls: Any
    fn: HandlerFn

    def supports(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version


HANDLERS: dict[int, Handler] = {}


class CloseConnection(Exception):
    """Raised by a handler whose only way to tell the client is to close the connection (e.g. an acks=0 produce
    that failed: KafkaApis closes the connection so the client notices)."""


def handles(request_cls: Any, response_cls: Any, versions: tuple[int, int]) -> Callable[[HandlerFn], HandlerFn]:
    """Register ``fn`` as the handler of ``request_cls``'s API key for ``versions`` (inclusive)."""
    lo, hi = versions
    if not (0 <= lo <= hi <= request_cls.max_version):
        raise ValueError(f"{request_cls.name}: versions {versions} outside the schema's 0..{request_cls.max_version}")

    def register(fn: HandlerFn) -> HandlerFn:
        key = request_cls.API_KEY
        if key in HANDLERS:
            raise RuntimeError(f"API key {key} ({request_cls.name}) registered twice")
        HANDLERS[key] = Handler(key, request_cls.name.removesuffix("Request"), lo, hi, request_cls, response_cls, fn)
        return fn

    return register


def load_all() -> dict[int, Handler]:
    """Import every module in apis/ so each registers itself."""
    import importlib
    import pkgutil

    from . import apis

    for mod in pkgutil.iter_modules(apis.__path__):
        importlib.import_module(f"{apis.__name__}.{mod.name}")
    return HANDLERS
