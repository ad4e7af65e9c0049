"""`ProxyServer`: the proxy collection plus its HTTP API, run in a background thread or in the caller's loop.

Why a thread: tests and nemeses are mostly synchronous (toxiproxy-python, confluent-kafka); the proxy needs an
event loop of its own that keeps pumping bytes while the caller blocks. Everything it opens it closes in stop().
"""

from __future__ import annotations

import asyncio
import random
import threading
from types import TracebackType

from .api import ApiServer
from .server import ProxyCollection, split_address


class ProxyServer:
    """A Toxiproxy-compatible server: `start()` in a thread, `stop()` closes every listener and connection."""

    def __init__(self, api: str = "127.0.0.1:0", *, seed: int | None = None, loopback_only: bool = True) -> None:
        self.api_host, self.api_port = split_address(api)
        self.collection = ProxyCollection(random.Random(seed), loopback_only)
        self._api = ApiServer(self.collection)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stopped: asyncio.Event | None = None

    @property
    def api_address(self) -> str:
        """'host:port' of the HTTP API (the real port once started)."""
        return f"{self.api_host}:{self.api_port}"

    @property
    def url(self) -> str:
        return f"http://{self.api_address}"

    # -- in the caller's event loop
    async def open(self) -> None:
        """Start listening for API requests in the running loop."""
        self.api_host, self.api_port = await self._api.listen(self.api_host, self.api_port)

    async def aclose(self) -> None:
        """Close the API and every proxy (listeners and connections)."""
        await self._api.close()
        await self.collection.clear()

    async def serve_forever(self) -> None:
        """Open, then run until `request_stop()` (the CLI's main loop)."""
        self._stopped = asyncio.Event()
        await self.open()
        try:
            await self._stopped.wait()
        finally:
            await self.aclose()

    def request_stop(self) -> None:
        if self._stopped is not None:
            self._stopped.set()

    # -- in a background thread
    def start(self, timeout: float = 10.0) -> ProxyServer:
        """Run the server in a daemon thread; returns once the API listens (raises what open() raised)."""
        ready = threading.Event()
        error: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                loop.run_until_complete(self.open())
            except BaseException as e:  # noqa: BLE001 - handed to the starting thread
                error.append(e)
                ready.set()
                loop.close()
                return
            ready.set()
            try:
                loop.run_forever()
            finally:
                loop.run_until_complete(self.aclose())
                loop.run_until_complete(loop.shutdown_asyncgens())
                loop.close()

        self._thread = threading.Thread(target=run, name=f"chaos-proxy-{self.api_port}", daemon=True)
        self._thread.start()
        if not ready.wait(timeout):
            raise TimeoutError("proxy server did not start")
        if error:
            self._thread.join(timeout)
            raise error[0]
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the thread's loop after closing every listener and connection; idempotent."""
        if self._loop is not None and self._thread is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout)
        self._thread = None

    def __enter__(self) -> ProxyServer:
        return self.start()

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()
