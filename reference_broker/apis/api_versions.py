"""ApiVersions (key 18), v0–v4.

Behavior:
- The answer is built from the handler registry: exactly the keys and version ranges implemented.
- An unsupported ApiVersions version gets a v0 body with UNSUPPORTED_VERSION and the full list, so the client can
  retry at a version we serve (KIP-511); its response header is always v0.
- v3+ client software name/version are accepted and ignored.
- v3+ features (KIP-584), on the broker listener: ``transaction.version`` finalized at the cluster's level
  (``transaction.version`` setting, 2 by default as Kafka 4.x formats it; KIP-890 part 2: clients that see 2 bump
  the epoch per transaction) and supported 0–2. As Kafka 4.4.0 answers (seen: ApiVersions v3 and v4 to a 1-node
  cluster), the supported list of a v3 answer leaves out features whose minimum is 0 (older clients cannot read a
  0 minimum, KIP-1022), so v3 lists none and v4+ lists transaction.version 0–2; finalized entries have min = max =
  the level; finalized_features_epoch is the metadata offset applied (Kafka: the features image's offset).
  Other Kafka features (metadata.version, group.version, ...) are not advertised (GAPS.md).
"""
from __future__ import annotations

from kafka import errors as E
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse

from ..context import BrokerContext
from ..registry import Registry, handles

API_KEY = 18
VERSIONS = (0, 4)
TRANSACTION_VERSION = "transaction.version"
TV_SUPPORTED = (0, 2)            # TransactionVersion TV_0..TV_2


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
    level = config["transaction.version"]
    supported = [] if version < 4 and TV_SUPPORTED[0] == 0 else [ApiVersionsResponse.SupportedFeatureKey(
        name=TRANSACTION_VERSION, min_version=TV_SUPPORTED[0], max_version=TV_SUPPORTED[1])]
    finalized = [] if level <= 0 else [ApiVersionsResponse.FinalizedFeatureKey(
        name=TRANSACTION_VERSION, max_version_level=level, min_version_level=level)]
    return supported, finalized, max(image.offset, 0)
