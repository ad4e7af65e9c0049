"""ApiVersions (key 18), v0–v4.

Behavior:
- The answer is built from the handler registry: exactly the keys and version ranges implemented.
- An unsupported ApiVersions version gets a v0 body with UNSUPPORTED_VERSION and the full list, so the client can
  retry at a version we serve (KIP-511); its response header is always v0.
- v3+ client software name/version are accepted and ignored.
- v3+ features (KIP-584), on the broker listener: the supported ranges of reference_broker/features.py and the
  levels finalized in the metadata log (feature_level records, written when the log is formatted, applied by the
  image). As Kafka 4.4.0 answers (seen: ApiVersions v3 and v4 to a 3-broker cluster), the supported list of a v3
  answer leaves out features whose minimum is 0 (older clients cannot read a 0 minimum, KIP-1022), so v3 lists none
  and v4+ lists them all; finalized entries (levels above 0 only) have min = max = the level;
  finalized_features_epoch is the metadata offset applied (Kafka: the metadata image's offset).
"""
from __future__ import annotations

from kafka import errors as E
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse

from ..context import BrokerContext
from ..features import supported as feature_ranges
from ..registry import Registry, handles

API_KEY = 18
VERSIONS = (0, 4)


def _api_keys(registry: Registry) -> list:
    return [ApiVersionsResponse.ApiVersion(api_key=h.api_key, min_version=h.min_version, max_version=h.max_version)
            for h in sorted(registry.handlers.values(), key=lambda h: h.api_key)]


def unsupported_version_response(registry: Registry) -> ApiVersionsResponse:
    return ApiVersionsResponse(error_code=E.UnsupportedVersionError.errno, api_keys=_api_keys(registry))


@handles(ApiVersionsRequest, ApiVersionsResponse, VERSIONS)
async def handle(ctx: BrokerContext, req):
    """Served by both roles: the answer lists the registry of the listener that got the request."""
    resp = ApiVersionsResponse(error_code=0, api_keys=_api_keys(ctx.registry), throttle_time_ms=0)
    if ctx.api_version >= 3:
        supported, finalized, epoch = features(ctx.node, ctx.api_version)
        resp.supported_features, resp.finalized_features, resp.finalized_features_epoch = supported, finalized, epoch
    return resp


def features(node, version: int) -> tuple[list, list, int]:
    """(supported, finalized, finalized epoch) of a broker node; a controller listener lists none."""
    config = getattr(node, "config", None)
    image = getattr(node, "image", None)
    if config is None or image is None:
        return [], [], -1
    supported = [ApiVersionsResponse.SupportedFeatureKey(name=name, min_version=lo, max_version=hi)
                 for name, (lo, hi) in feature_ranges().items() if version >= 4 or lo > 0]
    finalized = [ApiVersionsResponse.FinalizedFeatureKey(name=name, max_version_level=level, min_version_level=level)
                 for name, level in image.features.items() if level > 0]
    return supported, finalized, max(image.offset, 0)
