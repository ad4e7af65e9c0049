"""BrokerRegistration (key 62), v0 — our own trimmed schema (controller/schemas/), KIP-631 semantics.

Behavior (ClusterControlManager.registerBroker): a new registration is written as a register_broker record whose
offset becomes the broker epoch; the broker starts fenced. INCONSISTENT_CLUSTER_ID for another cluster id;
DUPLICATE_BROKER_REGISTRATION while another incarnation of the same id still has a live session. With ELR on, a new
incarnation whose previous_broker_epoch is not the old registration's epoch had an unclean shutdown (KIP-966).
"""
from __future__ import annotations

from ...registry import CONTROLLER
from ..context import ControllerContext
from ..messages import BrokerRegistrationRequest, BrokerRegistrationResponse

API_KEY = 62
VERSIONS = (0, 0)


@CONTROLLER.handles(BrokerRegistrationRequest, BrokerRegistrationResponse, VERSIONS)
async def handle(ctx: ControllerContext, req):
    err, epoch = ctx.node.controller.register_broker(
        req.broker_id, req.cluster_id, str(req.incarnation_id), req.host, req.port, req.replication_host,
        req.replication_port, req.rack, req.previous_broker_epoch)
    return BrokerRegistrationResponse(throttle_time_ms=0, error_code=err, broker_epoch=epoch)
