"""ApiVersions (key 18) on the controller listener: the same handler as the broker's, over the controller registry."""
from __future__ import annotations

from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse

from ...apis.api_versions import VERSIONS, handle
from ...registry import CONTROLLER

API_KEY = 18
CONTROLLER.handles(ApiVersionsRequest, ApiVersionsResponse, VERSIONS)(handle)
