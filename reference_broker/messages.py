"""Kafka client APIs that kafka-python ships no schema for, defined from our own small JSON schemas in ``schemas/``.

ConsumerGroupHeartbeat (68) and ConsumerGroupDescribe (69) are KIP-848's. The same machinery as the controller's
RPCs (reference_broker/controller/messages.py): kafka-python's ``ApiMessage`` loads a schema in Kafka's format, so
these encode and decode like any other API and the wire helpers (conformance/wire.py) can use them too.
"""
from __future__ import annotations

from kafka.protocol.api_message import ApiMessage

_PKG = "reference_broker.schemas"


class ConsumerGroupHeartbeatRequest(ApiMessage, load_json=_PKG): pass      # noqa: E701
class ConsumerGroupHeartbeatResponse(ApiMessage, load_json=_PKG): pass     # noqa: E701
class ConsumerGroupDescribeRequest(ApiMessage, load_json=_PKG): pass       # noqa: E701
class ConsumerGroupDescribeResponse(ApiMessage, load_json=_PKG): pass      # noqa: E701
