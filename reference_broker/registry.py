"""Handler registries: each API module registers itself with the versions it serves.

Two registries, one per role: ``BROKER`` (client-facing APIs, modules in ``apis/``) and ``CONTROLLER`` (the
controller's RPCs, modules in ``controller/apis/``). ApiVersions is built from a registry, so each role advertises
exactly what it implements. Duplicate registration is a programming error and fails at import time.
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


class CloseConnection(Exception):
    """Raised by a handler whose only way to tell the client is to close the connection (e.g. an acks=0 produce
    that failed: KafkaApis closes the connection so the client notices)."""


class Registry:
    def __init__(self, name: str, package: str) -> None:
        self.name = name
        self.package = package
        self.handlers: dict[int, Handler] = {}

    def handles(self, request_cls: Any, response_cls: Any,
                versions: tuple[int, int]) -> Callable[[HandlerFn], HandlerFn]:
        """Register ``fn`` as the handler of ``request_cls``'s API key for ``versions`` (inclusive)."""
        lo, hi = versions
        if not (0 <= lo <= hi <= request_cls.max_version):
            raise ValueError(f"{request_cls.name}: versions {versions} outside the schema's "
                             f"0..{request_cls.max_version}")

        def register(fn: HandlerFn) -> HandlerFn:
            key = request_cls.API_KEY
            if key in self.handlers:
                raise RuntimeError(f"{self.name}: API key {key} ({request_cls.name}) registered twice")
            self.handlers[key] = Handler(key, request_cls.name.removesuffix("Request"), lo, hi, request_cls,
                                         response_cls, fn)
            return fn

        return register

    def load_all(self) -> dict[int, Handler]:
        """Import every module of the registry's package so each registers itself."""
        import importlib
        import pkgutil

        pkg = importlib.import_module(self.package)
        for mod in pkgutil.iter_modules(pkg.__path__):
            importlib.import_module(f"{pkg.__name__}.{mod.name}")
        return self.handlers


BROKER = Registry("broker", "reference_broker.apis")
CONTROLLER = Registry("controller", "reference_broker.controller.apis")

# The broker registry under its historical names (apis/*.py use ``handles``).
HANDLERS = BROKER.handlers
handles = BROKER.handles


def load_all() -> dict[int, Handler]:
    return BROKER.load_all()
