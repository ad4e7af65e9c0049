"""DescribeCluster (key 60), v1–v2, on the controller listener (KIP-919: clients bootstrapping from controllers).

Behavior (ControllerApis.handleDescribeCluster): only EndpointType 2 (controllers) is described here, another is
MISMATCHED_ENDPOINT_TYPE; the answer lists the quorum's voters with their CONTROLLER listener and, as ControllerId,
the Raft leader (-1 while there is none), so an admin client (Kafka's `kafka-metadata-quorum --bootstrap-controller`)
then sends DescribeQuorum to the active controller. A single controller lists itself. Fenced and rack: none.
cluster_authorized_operations as on a broker's listener (AuthHelper.computeDescribeClusterResponse serves both).
"""
from __future__ import annotations

from kafka import errors as E
from kafka.protocol.admin import DescribeClusterRequest, DescribeClusterResponse

from ...apis.describe_cluster import cluster_operations
from ...registry import CONTROLLER
from ..context import ControllerContext

API_KEY = 60
VERSIONS = (1, 2)
CONTROLLERS = 2

B = DescribeClusterResponse.DescribeClusterBroker


@CONTROLLER.handles(DescribeClusterRequest, DescribeClusterResponse, VERSIONS)
async def handle(ctx: ControllerContext, req):
    node = ctx.node
    cid = node.config["cluster.id"]
    if req.endpoint_type != CONTROLLERS:
        return DescribeClusterResponse(throttle_time_ms=0, error_code=E.MismatchedEndpointTypeError.errno,
                                       error_message="The request was sent to an endpoint of type CONTROLLER, but "
                                                     f"we wanted an endpoint of type {req.endpoint_type}",
                                       endpoint_type=req.endpoint_type, cluster_id=cid, controller_id=-1,
                                       brokers=[])
    if node.raft is None:
        me = node.config["node.id"]
        voters, leader = {me: (node.host, node.port)}, me
    else:
        voters, leader = node.raft.voters, node.raft.client.leader_id()
    return DescribeClusterResponse(
        throttle_time_ms=0, error_code=0, error_message=None, endpoint_type=CONTROLLERS, cluster_id=cid,
        controller_id=-1 if leader is None else leader,
        brokers=[B(broker_id=v, host=h, port=p, rack=None, is_fenced=False) for v, (h, p) in sorted(voters.items())],
        authorized_operations=cluster_operations(req))
