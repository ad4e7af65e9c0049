"""Toxiproxy's API errors as named values, each with its HTTP status, rendered by one helper (`render`).

The messages and statuses are Toxiproxy's (api.go), so clients written for Toxiproxy (toxiproxy-python maps
400/404/409 to its own exceptions) behave the same against this proxy.
"""

from __future__ import annotations

import json


class ApiError(Exception):
    """An error answer: `message` goes into {"error": ..., "status": ...} with `status` as the HTTP status."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.message = message
        self.status = status

    def joined(self, detail: str) -> ApiError:
        """Toxiproxy's joinError: "<message>: <detail>" with the same status."""
        return ApiError(f"{self.message}: {detail}", self.status)

    def body(self) -> dict[str, object]:
        return {"error": self.message, "status": self.status}


BAD_REQUEST_BODY = ApiError("bad request body", 400)
MISSING_FIELD = ApiError("missing required field", 400)
PROXY_NOT_FOUND = ApiError("proxy not found", 404)
PROXY_ALREADY_EXISTS = ApiError("proxy already exists", 409)
INVALID_STREAM = ApiError("stream was invalid, can be either upstream or downstream", 400)
INVALID_TOXIC_TYPE = ApiError("invalid toxic type", 400)
TOXIC_ALREADY_EXISTS = ApiError("toxic already exists", 409)
TOXIC_NOT_FOUND = ApiError("toxic not found", 404)


def listen_error(address: str, exc: OSError | str) -> ApiError:
    """A proxy could not listen: Toxiproxy answers 500 with Go's net error text, so do we."""
    reason = exc if isinstance(exc, str) else (exc.strerror or str(exc)).lower()
    if isinstance(exc, OSError) and exc.errno == 98:
        reason = "bind: address already in use"
    return ApiError(f"listen tcp {address}: {reason}", 500)


def render(err: ApiError) -> tuple[int, bytes]:
    """The one place an error becomes an HTTP answer: (status, JSON body)."""
    return err.status, json.dumps(err.body()).encode()
