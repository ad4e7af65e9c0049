"""Kafka's internal controller RPCs that kafka-python ships no schema for, defined from our own small JSON schemas.

BrokerRegistration (62) and BrokerHeartbeat (63) are KIP-631's; AlterPartition (56) is KIP-497's.
Vote (52), BeginQuorumEpoch (53) and EndQuorumEpoch (54) are KIP-595's (the metadata quorum). The schemas in
``schemas/`` keep only the fields the reference cluster uses (documented per field), in Kafka's schema format, so
kafka-python's ``kafka.protocol`` encodes and decodes them like any other API: no hand codecs.
"""
from __future__ import annotations

from kafka.protocol.api_message import ApiMessage

_PKG = "reference_broker.controller.schemas"


class BrokerRegistrationRequest(ApiMessage, load_json=_PKG): pass      # noqa: E701
class BrokerRegistrationResponse(ApiMessage, load_json=_PKG): pass     # noqa: E701
class BrokerHeartbeatRequest(ApiMessage, load_json=_PKG): pass         # noqa: E701
class BrokerHeartbeatResponse(ApiMessage, load_json=_PKG): pass        # noqa: E701
class AlterPartitionRequest(ApiMessage, load_json=_PKG): pass          # noqa: E701
class AlterPartitionResponse(ApiMessage, load_json=_PKG): pass         # noqa: E701
# KIP-595's quorum RPCs between controllers (Vote with KIP-996's PreVote at v2).
class VoteRequest(ApiMessage, load_json=_PKG): pass                    # noqa: E701
class VoteResponse(ApiMessage, load_json=_PKG): pass                   # noqa: E701
class BeginQuorumEpochRequest(ApiMessage, load_json=_PKG): pass        # noqa: E701
class BeginQuorumEpochResponse(ApiMessage, load_json=_PKG): pass       # noqa: E701
class EndQuorumEpochRequest(ApiMessage, load_json=_PKG): pass          # noqa: E701
class EndQuorumEpochResponse(ApiMessage, load_json=_PKG): pass         # noqa: E701
