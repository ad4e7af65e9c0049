"""DescribeCluster (key 60), v0–v2 as Kafka 4.4.0 serves them (KIP-700; v1 endpoint type, KIP-919; v2 fenced
brokers, KIP-1073): the cluster id, a controller id and the brokers, as the admin client's describeCluster and
`kafka-broker-api-versions` / `kafka-cluster` use them.

Behavior (Kafka's KafkaApis.handleDescribeCluster on a broker listener):
- endpoint_type (v1+) other than BROKER (1), as Kafka 4.4.0 answers: MISMATCHED_ENDPOINT_TYPE "The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type CONTROLLER", empty
  cluster id, controller -1, no brokers;
- brokers: the unfenced ones (v2 include_fenced_brokers: the fenced ones too, with is_fenced), sorted by id, with
  the registered address clients are told (as Metadata); controller_id as Metadata answers it;
- cluster_authorized_operations (AuthHelper.computeDescribeClusterResponse): INT32_MIN (the schema default) unless
  include_cluster_authorized_operations; then, with no authorizer (the reference has no ACLs), every operation
  Kafka supports on the CLUSTER resource (CLUSTER_OPS), as Kafka 4.4.0 answers without an authorizer.
"""
from __future__ import annotations

from kafka import errors as E
from kafka.protocol.admin import DescribeClusterRequest, DescribeClusterResponse

from ..context import BrokerContext
from ..registry import handles

API_KEY = 60
VERSIONS = (0, 2)
BROKER_ENDPOINT, CONTROLLER_ENDPOINT = 1, 2

Broker = DescribeClusterResponse.DescribeClusterBroker
# cluster_authorized_operations as kafka-python's codec takes it (field authorized_operations): the set of operation
# codes, None for the schema's default INT32_MIN ("not asked")
NOT_ASKED = None
# AclEntry.supportedOperations(CLUSTER): CREATE 5, ALTER 7, DESCRIBE 8, CLUSTER_ACTION 9, DESCRIBE_CONFIGS 10,
# ALTER_CONFIGS 11, IDEMPOTENT_WRITE 12 -> bit field 8096 (what Kafka 4.4.0 answers with no authorizer configured)
CLUSTER_OPS = frozenset({5, 7, 8, 9, 10, 11, 12})


def cluster_operations(req) -> set[int] | None:
    """cluster_authorized_operations as Kafka's AuthHelper fills it (no authorizer: every cluster operation)."""
    return set(CLUSTER_OPS) if req.include_cluster_authorized_operations else NOT_ASKED


@handles(DescribeClusterRequest, DescribeClusterResponse, VERSIONS)
async def handle(ctx: BrokerContext, req):
    b = ctx.broker
    if ctx.api_version >= 1 and req.endpoint_type != BROKER_ENDPOINT:
        wanted = "CONTROLLER" if req.endpoint_type == CONTROLLER_ENDPOINT else "UNKNOWN"
        return DescribeClusterResponse(
            throttle_time_ms=0, error_code=E.MismatchedEndpointTypeError.errno,
            error_message=f"The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type "
                          f"{wanted}", endpoint_type=BROKER_ENDPOINT, cluster_id="", controller_id=-1, brokers=[])
    fenced_too = ctx.api_version >= 2 and req.include_fenced_brokers
    brokers = []
    for reg in sorted(b.image.brokers.values(), key=lambda r: r.broker_id):
        if reg.fenced and not fenced_too:
            continue
        brokers.append(Broker(broker_id=reg.broker_id, host=reg.host, port=reg.port, rack=reg.rack, is_fenced=reg.fenced))
    return DescribeClusterResponse(throttle_time_ms=0, error_code=0, error_message=None,
                                   endpoint_type=BROKER_ENDPOINT, cluster_id=b.cluster_id,
                                   controller_id=b.controller_id, brokers=brokers,
                                   authorized_operations=cluster_operations(req))
