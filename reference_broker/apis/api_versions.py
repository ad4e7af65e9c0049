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

from ..registry import HANDLERS, handles

API_KEY = 18
VERSIONS = (0, 4)


def _api_keys() -> list:
    return [ApiVersionsResponse.ApiVersion(api_key=h.api_key, min_version=h.min_version, max_version=h.max_version)
            for h in sorted(HANDLERS.values(), key=lambda h: h.api_key)]


def unsupported_version_response() -> ApiVersionsResponse:
    return ApiVersionsResponse(error_code=E.UnsupportedVersionError.errno, api_keys=_api_keys())


@handles(ApiVersionsRequest, ApiVersionsResponse, VERSIONS)
async def handle(ctx, req):
    return ApiVersionsResponse(error_code=0, api_keys=_api_keys(), throttle_time_ms=0)
