"""DescribeCluster (key 60), v0–v2 as Kafka 4.4.0 serves them (KIP-700; v1 endpoint type, KIP-919; v2 fenced
brokers, KIP-1073): the cluster id, a controller id and the brokers, as the admin client's describeCluster and
`kafka-broker-api-versions` / `kafka-cluster` use them.

Behavior (Kafka's KafkaApis.handleDescribeCluster on a broker listener):
- endpoint_type (v1+) other than BROKER (1), as Kafka 4.4.0 answers: MISMATCHED_ENDPOINT_TYPE "The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type CONTROLLER", empty
  cluster id, controller -1, no brokers;
- brokers: the unfenced ones (v2 include_fenced_brokers: the fenced ones too, with is_fenced), sorted by id, with
  the registered address clients are told (as Metadata); controller_id as Metadata answers it; authorized operations are not
  computed (no ACLs: the field keeps its default, INT32_MIN, as Kafka answers when not asked).
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
                                   controller_id=b.controller_id, brokers=brokers)
