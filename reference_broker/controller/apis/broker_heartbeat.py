"""BrokerHeartbeat (key 63), v0 — our own trimmed schema, KIP-631 semantics.

Behavior (ClusterControlManager / BrokerHeartbeatManager): a heartbeat renews the broker's session; a fenced
broker that has applied the metadata log past its registration is unfenced (and leaderless partitions it is in
the ISR of elect it). WantShutDown from an unfenced broker that leads partitions starts a controlled shutdown: it
stays registered and unfenced but ineligible, its leaderships move and it leaves every ISR, and ShouldShutDown is
answered (and the broker fenced) once every active broker applied the metadata past that point; a fenced broker,
one that also asks WantFence, or one that leads nothing may shut down at once. A stale broker epoch is
STALE_BROKER_EPOCH. Sessions that see no heartbeat for broker.session.timeout.ms are fenced by
the controller's ticker. In a quorum: NOT_CONTROLLER from an inactive controller; answered once committed.
"""
from __future__ import annotations

from kafka import errors as E

from ...registry import CONTROLLER
from ..context import ControllerContext
from ..messages import BrokerHeartbeatRequest, BrokerHeartbeatResponse

API_KEY = 63
VERSIONS = (0, 0)


@CONTROLLER.handles(BrokerHeartbeatRequest, BrokerHeartbeatResponse, VERSIONS)
async def handle(ctx: ControllerContext, req):
    c = ctx.node.controller
    if not c.active:
        return BrokerHeartbeatResponse(throttle_time_ms=0, error_code=E.NotControllerError.errno, is_caught_up=False,
                                       is_fenced=True, should_shut_down=False)
    r = c.heartbeat(req.broker_id, req.broker_epoch, req.current_metadata_offset, req.want_fence, req.want_shut_down)
    if not await c.wait_committed():
        return BrokerHeartbeatResponse(throttle_time_ms=0, error_code=E.NotControllerError.errno, is_caught_up=False,
                                       is_fenced=True, should_shut_down=False)
    return BrokerHeartbeatResponse(throttle_time_ms=0, error_code=r.error, is_caught_up=r.is_caught_up,
                                   is_fenced=r.is_fenced, should_shut_down=r.should_shut_down)
