"""DescribeConfigs (key 32), v0–v4.

Why: admin tools and the suites ask a broker its settings (replica.lag.time.max.ms, group session bounds,
max.message.bytes) instead of assuming Kafka's defaults; a target that tells can be judged exactly.

Behavior (Kafka's ConfigHelper.describeConfigs):
- TOPIC (2): every topic config Kafka 4.4.0 lists (topic_config.KAFKA_TOPIC_CONFIGS) with its type, each the
  topic's override (source DYNAMIC_TOPIC_CONFIG) or the default: the broker setting it maps to where the broker
  honours it, else Kafka's default (DEFAULT_CONFIG); unknown topic → UNKNOWN_TOPIC_OR_PARTITION.
- BROKER (4): this broker's settings (name = its node id, or "" for the cluster default), source STATIC_BROKER_CONFIG
  when set at start, else DEFAULT_CONFIG; another broker's id → INVALID_REQUEST, as Kafka.
- configuration_keys narrows the list (null: all); other resource types → INVALID_REQUEST. Nothing is sensitive,
  synonyms and documentation are sent empty, broker settings have config_type UNKNOWN (GAPS.md).
"""
from __future__ import annotations

from typing import Any

from kafka.protocol.admin import DescribeConfigsRequest, DescribeConfigsResponse

from ..config import DEFAULTS
from ..registry import handles
from ..topic_config import KAFKA_TOPIC_CONFIGS, topic_setting

API_KEY = 32
VERSIONS = (0, 4)

TOPIC, BROKER = 2, 4
DYNAMIC_TOPIC_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 1, 4, 5
UNKNOWN_TOPIC_OR_PARTITION, INVALID_REQUEST = 3, 42
Result = DescribeConfigsResponse.DescribeConfigsResult
Entry = Result.DescribeConfigsResourceResult


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


# DescribeConfigsResponse config_type (ConfigDef.Type)
CONFIG_TYPES = {"boolean": 1, "string": 2, "int": 3, "long": 5, "double": 6, "list": 7}


def _entry(name: str, value: Any, source: int, read_only: bool, config_type: int = 0) -> Entry:
    return Entry(name=name, value=_text(value), read_only=read_only, config_source=source,
                 is_default=source == DEFAULT_CONFIG, is_sensitive=False, synonyms=[], config_type=config_type,
                 documentation=None)


def _topic_value(b, configs: dict[str, str], key: str) -> Any:
    if key in configs:
        return configs[key]                # as given (Kafka echoes the stored string)
    return topic_setting(configs, b.config, key)


def _topic(b, name: str) -> tuple[int, str | None, list[Entry]]:
    t = b.image.topics.get(name)
    if t is None:
        return UNKNOWN_TOPIC_OR_PARTITION, f"topic {name} does not exist", []
    return 0, None, [_entry(k, _topic_value(b, t.configs, k),
                            DYNAMIC_TOPIC_CONFIG if k in t.configs else DEFAULT_CONFIG, False,
                            CONFIG_TYPES[d.type])
                     for k, d in sorted(KAFKA_TOPIC_CONFIGS.items())]


def _broker(b, name: str) -> tuple[int, str | None, list[Entry]]:
    if name not in ("", str(b.node_id)):
        return INVALID_REQUEST, f"unexpected broker id, expected {b.node_id} or empty string, but received {name}", []
    values = b.config.as_dict()
    return 0, None, [_entry(k, v, DEFAULT_CONFIG if k in DEFAULTS and v == DEFAULTS[k][1] else STATIC_BROKER_CONFIG, True)
                     for k, v in sorted(values.items())]


@handles(DescribeConfigsRequest, DescribeConfigsResponse, VERSIONS)
async def handle(ctx, req):
    b = ctx.broker
    results = []
    for r in req.resources:
        if r.resource_type == TOPIC:
            err, msg, entries = _topic(b, r.resource_name)
        elif r.resource_type == BROKER:
            err, msg, entries = _broker(b, r.resource_name)
        else:
            err, msg, entries = INVALID_REQUEST, f"resource type {r.resource_type} is not described here", []
        if r.configuration_keys is not None:
            wanted = set(r.configuration_keys)
            entries = [e for e in entries if e.name in wanted]
        results.append(Result(error_code=err, error_message=msg, resource_type=r.resource_type,
                              resource_name=r.resource_name, configs=entries))
    return DescribeConfigsResponse(throttle_time_ms=0, results=results)
