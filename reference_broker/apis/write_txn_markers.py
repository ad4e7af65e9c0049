"""WriteTxnMarkers (key 27), v1–v2: from a transaction coordinator to partition leaders.

Behavior (KafkaApis.handleWriteTxnMarkersRequest): each marker's partitions get a COMMIT or ABORT control batch
(producer id and epoch of the marker), appended as leader with acks=all and answered once replicated;
NOT_LEADER_OR_FOLLOWER / UNKNOWN_TOPIC_OR_PARTITION elsewhere, INVALID_PRODUCER_EPOCH when the marker's epoch is older
than the producer's in that log — or, for a v2 marker of transaction version 2 (its ``transaction_version`` field,
KIP-1228; v1 and a v2 marker saying 0/1 are the classic rule), not newer, unless no transaction is open there (a
retried marker): a delayed marker of the previous transaction must not complete the current one. Markers on ``__consumer_offsets`` partitions also complete the producer's
TxnOffsetCommit in the group coordinator. Served on the client port (Kafka's cluster action API; no ACLs here).
"""
from __future__ import annotations

from kafka.protocol.producer import WriteTxnMarkersRequest, WriteTxnMarkersResponse

from ..context import BrokerContext
from ..registry import handles
from ..txn_coordinator import Marker

API_KEY = 27
VERSIONS = (1, 2)
MARKER_TIMEOUT_S = 30.0           # request.timeout.ms

R = WriteTxnMarkersResponse.WritableTxnMarkerResult
TopicR = R.WritableTxnMarkerTopicResult
PartR = TopicR.WritableTxnMarkerPartitionResult


def transaction_version(api_version: int, marker) -> int:
    """The marker's transaction version: its v2 field, 0 (legacy) for v1 (the field's default)."""
    return int(marker.transaction_version or 0) if api_version >= 2 else 0


@handles(WriteTxnMarkersRequest, WriteTxnMarkersResponse, VERSIONS)
async def handle(ctx: BrokerContext, req):
    b = ctx.broker
    markers = [Marker(t.name, p, m.producer_id, m.producer_epoch, m.coordinator_epoch, m.transaction_result,
                      transaction_version(ctx.api_version, m))
               for m in req.markers for t in m.topics for p in t.partition_indexes]
    errors = await b.write_markers(markers, MARKER_TIMEOUT_S)
    return WriteTxnMarkersResponse(markers=[
        R(producer_id=m.producer_id, topics=[
            TopicR(name=t.name, partitions=[PartR(partition_index=p, error_code=errors[(t.name, p)])
                                            for p in t.partition_indexes]) for t in m.topics])
        for m in req.markers])
