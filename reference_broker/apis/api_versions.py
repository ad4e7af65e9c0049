"""ApiVersions (key 18), v0–v4.

Behavior:
- The answer is built from the handler registry: exactly the keys and version ranges implemented.
- An unsupported ApiVersions version gets a v0 body with UNSUPPORTED_VERSION and the full list, so the client can
  retry at a version we serve (KIP-511); its response header is always v0.
- v3+ client software name/version are accepted and ignored. No supported features are advertised.
"""
from __future__ import annotations

from kafka import errors as E
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse

from ..registry import Registry, handles

API_KEY = 18
VERSIONS = (0, 4)


def _api_keys(registry: Registry) -> list:
    return [ApiVersionsResponse.ApiVersion(api_key=h.api_key, min_version=h.min_version, max_version=h.max_version)
            for h in sorted(registry.handlers.values(), key=lambda h: h.api_key)]


def unsupported_version_response(registry: Registry) -> ApiVersionsResponse:
    return ApiVersionsResponse(error_code=E.UnsupportedVersionError.errno, api_keys=_api_keys(registry))


@handles(ApiVersionsRequest, ApiVersionsResponse, VERSIONS)
async def handle(ctx, req):
    """Served by both roles: the answer lists the registry of the listener that got the request."""
    return ApiVersionsResponse(error_code=0, api_keys=_api_keys(ctx.registry), throttle_time_ms=0)
