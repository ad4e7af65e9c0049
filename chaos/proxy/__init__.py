"""A Toxiproxy-compatible TCP proxy (same HTTP API and toxics) plus Kafka-aware toxics.

    python -m chaos proxy serve --api 127.0.0.1:8474      # prints "READY 127.0.0.1:8474"

or in-process: ``with ProxyServer("127.0.0.1:0") as srv: ...`` (srv.api_address). Drive it with any Toxiproxy
client (toxiproxy-python) or chaos.faults.ToxiproxyClient; both work against a real Toxiproxy too.
"""

from __future__ import annotations

from .app import ProxyServer

__all__ = ["ProxyServer"]
