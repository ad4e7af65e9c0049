"""DescribeConfigs (key 32), v0–v4.

Why: admin tools and the suites ask a broker its settings (replica.lag.time.max.ms, group session bounds,
max.message.bytes) instead of assuming Kafka's defaults; a target that tells can be judged exactly.

Behavior (Kafka's ConfigHelper.describeConfigs):
- TOPIC (2): every topic config Kafka 4.4.0 lists (topic_config.KAFKA_TOPIC_CONFIGS) with its type, each the
  topic's override (source DYNAMIC_TOPIC_CONFIG, shown parsed as Kafka shows it: "TRUE" is "true"), else the broker
  setting it maps to where the broker honours it (STATIC_BROKER_CONFIG when set at start), else Kafka's default
  (DEFAULT_CONFIG): topic_config.effective_topic_configs, as CreateTopics v5+ answers them; unknown topic →
  UNKNOWN_TOPIC_OR_PARTITION.
- BROKER (4): this broker's settings (name = its node id), source STATIC_BROKER_CONFIG when set at start, else
  DEFAULT_CONFIG; "" (the cluster's dynamic defaults) is empty: no dynamic configs here (GAPS.md); another broker's
  id → INVALID_REQUEST, as Kafka.
- configuration_keys narrows the list (null: all); other resource types → INVALID_REQUEST. Nothing is sensitive,
  synonyms and documentation are sent empty, broker settings have config_type UNKNOWN (GAPS.md).
  offset.metadata.max.bytes is shown (4096, DEFAULT_CONFIG): the limit OffsetCommit enforces, fixed here.
- error_message is "" for a described resource and for an unknown topic (Kafka leaves the field at its schema
  default there), the reason for the others.
"""
from __future__ import annotations

from typing import Any

from kafka.protocol.admin import DescribeConfigsRequest, DescribeConfigsResponse

from ..config import DEFAULTS
from ..context import BrokerContext
from ..registry import handles
from ..topic_config import DEFAULT_CONFIG, STATIC_BROKER_CONFIG, config_text, effective_topic_configs
from .offset_commit import MAX_METADATA

API_KEY = 32
VERSIONS = (0, 4)

TOPIC, BROKER = 2, 4
# settings the broker has but cannot be given (GAPS.md): shown as Kafka's defaults
FIXED = {"offset.metadata.max.bytes": MAX_METADATA}
UNKNOWN_TOPIC_OR_PARTITION, INVALID_REQUEST = 3, 42
Result = DescribeConfigsResponse.DescribeConfigsResult
Entry = Result.DescribeConfigsResourceResult


# DescribeConfigsResponse config_type (ConfigDef.Type)
CONFIG_TYPES = {"boolean": 1, "string": 2, "int": 3, "long": 5, "double": 6, "list": 7}


def _entry(name: str, value: Any, source: int, read_only: bool, config_type: int = 0) -> Entry:
    return Entry(name=name, value=config_text(value), read_only=read_only, config_source=source,
                 is_default=source == DEFAULT_CONFIG, is_sensitive=False, synonyms=[], config_type=config_type,
                 documentation=None)


def _topic(b, name: str) -> tuple[int, str | None, list[Entry]]:
    t = b.image.topics.get(name)
    if t is None:
        return UNKNOWN_TOPIC_OR_PARTITION, "", []   # Kafka sets no message here: the schema default ""
    return 0, "", [_entry(k, v, source, False, CONFIG_TYPES[kind])
                   for k, v, source, kind in effective_topic_configs(t.configs, b.config, as_stored=False)]


def _broker(b, name: str) -> tuple[int, str | None, list[Entry]]:
    if name not in ("", str(b.node_id)):
        return INVALID_REQUEST, f"unexpected broker id, expected {b.node_id} or empty string, but received {name}", []
    if name == "":
        # the cluster-wide dynamic defaults (DynamicBrokerConfig.currentDynamicDefaultConfigs): there are none here
        return 0, "", []
    values = b.config.as_dict()
    entries = [_entry(k, v, DEFAULT_CONFIG if k in DEFAULTS and v == DEFAULTS[k][1] else STATIC_BROKER_CONFIG, True)
               for k, v in values.items()]
    entries += [_entry(k, v, DEFAULT_CONFIG, True) for k, v in FIXED.items()]
    return 0, "", sorted(entries, key=lambda e: e.name)


@handles(DescribeConfigsRequest, DescribeConfigsResponse, VERSIONS)
async def handle(ctx: BrokerContext, req):
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
