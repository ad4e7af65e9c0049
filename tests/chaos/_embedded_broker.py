"""A reference broker in a thread whose *advertised* address can be set — a stopgap for tests only.

Why: the reference broker advertises the address it listens on, so a client bootstrapped through a proxy would
learn the broker's own address from Metadata/FindCoordinator and bypass the proxy. Until the broker grows an
`advertised.listeners` setting, this runs the broker's own classes in-process and sets the two attributes its
Metadata and FindCoordinator handlers read (`broker.host`, `broker.port`) to the proxy's address. Replace with
`--config advertised.listeners=...` when that lands.
"""

from __future__ import annotations

import asyncio
import threading

from reference_broker.broker import Broker
from reference_broker.config import BrokerConfig
from reference_broker.faults import Faults
from reference_broker.server import Server


class EmbeddedBroker:
    """start() -> listens on 127.0.0.1:<port>; advertise(host, port) changes what clients are told."""

    def __init__(self, *settings: str) -> None:
        self._settings = list(settings)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="embedded-broker", daemon=True)
        self.broker: Broker | None = None
        self._server: Server | None = None
        self.port = 0

    def start(self) -> EmbeddedBroker:
        self._thread.start()
        self.port = asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(30)
        return self

    async def _start(self) -> int:
        self.broker = Broker(BrokerConfig.from_pairs(self._settings), None, seed=1, faults=Faults([]))
        self._server = Server(self.broker)
        port = await self._server.start("127.0.0.1", 0)
        self.broker.host, self.broker.port = "127.0.0.1", port
        return port

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def advertise(self, host: str, port: int) -> None:
        assert self.broker is not None
        self.broker.host, self.broker.port = host, port

    def stop(self) -> None:
        async def _stop() -> None:
            if self._server is not None:
                await self._server.stop()
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for t in tasks:  # connection handlers the server leaves running
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            if self.broker is not None:
                self.broker.close()

        if self._thread.is_alive():
            asyncio.run_coroutine_threadsafe(_stop(), self._loop).result(30)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
        self._loop.close()
