"""UpdateFeatures (key 57), v0–v2, on the controller (forwarded by brokers), KIP-584.

Behavior (QuorumController.updateFeatures / FeatureControlManager.updateFeatures, Kafka 4.4.0): every update is
checked in request order and the first failure fails them all: INVALID_UPDATE_VERSION with "The update failed for
all features since the following feature had an error: Invalid update version N for feature F. <reason>" (reasons:
an unknown upgrade type; a level below 0; a level this controller does not support — "Local controller C does not
support this feature." / "... only supports versions A-B"; a downgrade with upgrade type UPGRADE; an upgrade with a
downgrade type). v0's allow_downgrade means a safe downgrade. Nothing is written with validate_only. On success the
levels are committed as feature_level records (level 0 removes a feature) and v0–v1 list each feature with NONE
(message "NONE"); v2
answers without per-feature results.
"""
from __future__ import annotations

from kafka import errors as E
from kafka.protocol.admin import UpdateFeaturesRequest, UpdateFeaturesResponse

from ...registry import CONTROLLER
from ..context import ControllerContext

API_KEY = 57
VERSIONS = (0, 2)
APPLY_WAIT_S = 5.0
UPGRADE, SAFE_DOWNGRADE = 1, 2

Result = UpdateFeaturesResponse.UpdatableFeatureResult


@CONTROLLER.handles(UpdateFeaturesRequest, UpdateFeaturesResponse, VERSIONS)
async def handle(ctx: ControllerContext, req):
    c = ctx.node.controller
    v = ctx.api_version
    updates = []
    for u in req.feature_updates:
        kind = (SAFE_DOWNGRADE if u.allow_downgrade else UPGRADE) if v == 0 else u.upgrade_type
        updates.append((u.feature, u.max_version_level, kind))
    err, message = c.update_features(updates, bool(req.validate_only) if v >= 1 else False)
    if err:
        return UpdateFeaturesResponse(throttle_time_ms=0, error_code=err, error_message=message, results=[])
    if not await c.wait_committed():     # acknowledged only once Raft committed the feature levels
        return UpdateFeaturesResponse(throttle_time_ms=0, error_code=E.NotControllerError.errno, error_message=None,
                                      results=[])
    await c.wait_applied(c.end_offset, APPLY_WAIT_S)
    # Kafka sets each result's message to Errors.NONE.message(): "NONE"
    results = [Result(feature=name, error_code=0, error_message="NONE") for name, _, _ in updates] if v <= 1 else []
    return UpdateFeaturesResponse(throttle_time_ms=0, error_code=0, error_message=None, results=results)
