"""What a broker checks of an IncrementalAlterConfigs / AlterConfigs request before it forwards the rest to the
controller (Kafka's ConfigAdminManager.preprocess), and the forwarding itself.

Why on the broker: Kafka answers these per resource without asking the controller (seen on Kafka 4.4.0): a
resource named twice (INVALID_REQUEST "Each resource must appear at most once." for each copy), a config named twice
("Error due to duplicate config keys"), a null value to set ("Null value not supported for : k"), an unknown
operation (UNKNOWN_SERVER_ERROR, no message), a resource type other than TOPIC or BROKER ("Unknown resource type
N"; BROKER_LOGGER, CLIENT_METRICS and GROUP configs are not served here: GAPS.md), a broker name that is not an
integer ("Node id must be an integer, but it is: x") or not this broker ("Unexpected broker id, expected 0, but
received 1": a broker changes only its own dynamic configs, or the cluster default "").
"""
from __future__ import annotations

from collections import Counter
from typing import Any

from kafka import errors as E

from .context import BrokerContext

TOPIC, BROKER = 2, 4
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
FORWARD_TIMEOUT_S = 30.0


def precheck(ctx: BrokerContext, resources: list[Any], incremental: bool) -> list[tuple[int, str | None] | None]:
    """Per resource: (error, message) answered here, or None to forward it to the controller."""
    seen = Counter((r.resource_type, r.resource_name) for r in resources)
    out: list[tuple[int, str | None] | None] = []
    for r in resources:
        out.append(_check(ctx, r, seen, incremental))
    return out


def _check(ctx: BrokerContext, r: Any, seen: Counter, incremental: bool) -> tuple[int, str | None] | None:
    if seen[(r.resource_type, r.resource_name)] > 1:
        return E.InvalidRequestError.errno, "Each resource must appear at most once."
    if r.resource_type not in (TOPIC, BROKER):
        return E.InvalidRequestError.errno, f"Unknown resource type {r.resource_type}"
    names = Counter(c.name for c in r.configs)
    if any(n > 1 for n in names.values()):
        return E.InvalidRequestError.errno, "Error due to duplicate config keys"
    for c in r.configs:
        op = c.config_operation if incremental else SET
        if op not in (SET, DELETE, APPEND, SUBTRACT):
            return E.UnknownError.errno, None
        if op != DELETE and c.value is None:
            return E.InvalidRequestError.errno, f"Null value not supported for : {c.name}"
    if r.resource_type == BROKER and r.resource_name != "":
        try:
            node = int(r.resource_name)
        except ValueError:
            return E.InvalidRequestError.errno, f"Node id must be an integer, but it is: {r.resource_name}"
        if node != ctx.broker.node_id:
            return (E.InvalidRequestError.errno,
                    f"Unexpected broker id, expected {ctx.broker.node_id}, but received {r.resource_name}")
    return None


async def forward_rest(ctx: BrokerContext, req: Any, resources: list[Any], checked: list, make_request: Any,
                       ) -> list[tuple[int, str | None]]:
    """Forward the resources not answered here in one request (KRaft's forwarding); (error, message) for all."""
    todo = [r for r, c in zip(resources, checked, strict=True) if c is None]
    answers: list[tuple[int, str | None]] = []
    if todo:
        try:
            resp = await ctx.broker.forward(make_request(todo), ctx.api_version, timeout=FORWARD_TIMEOUT_S)
            answers = [(x.error_code, x.error_message) for x in resp.responses]
        except (OSError, TimeoutError, E.KafkaError) as e:
            answers = [(E.RequestTimedOutError.errno, f"controller unreachable: {e}")] * len(todo)
    it = iter(answers)
    return [c if c is not None else next(it) for c in checked]
