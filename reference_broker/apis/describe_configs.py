"""DescribeConfigs (key 32), v1–v4 as Kafka 4.4.0 serves them.

Why: admin tools and the suites ask a broker its settings (replica.lag.time.max.ms, group session bounds,
max.message.bytes) instead of assuming Kafka's defaults; a target that tells can be judged exactly.

Behavior (Kafka's ConfigHelper.describeConfigs):
- TOPIC (2): every topic config Kafka 4.4.0 lists (topic_config.KAFKA_TOPIC_CONFIGS) with its type, each the
  topic's override (source DYNAMIC_TOPIC_CONFIG, shown parsed as Kafka shows it: "TRUE" is "true"), else a dynamic
  value of its broker synonym (this broker's: DYNAMIC_BROKER_CONFIG, the cluster default's:
  DYNAMIC_DEFAULT_BROKER_CONFIG; IncrementalAlterConfigs writes them), else the broker setting it maps to where the
  broker honours it (STATIC_BROKER_CONFIG when set at start), else Kafka's default (DEFAULT_CONFIG):
  topic_config.topic_config_entries, as CreateTopics v5+ answers them; with include_synonyms (v1+) the synonyms in
  Kafka's order and names (retention.ms → log.retention.ms, ..., log.retention.hours); unknown topic →
  UNKNOWN_TOPIC_OR_PARTITION.
- BROKER (4): this broker's settings (name = its node id) and every dynamic config set on it or on the cluster
  default, each from the highest layer that has it: per broker, cluster default, static, default; read_only unless
  Kafka changes it at run time (config.DYNAMIC_KEYS); a name Kafka does not know is sensitive (value hidden), as
  Kafka shows it. "" (the cluster's dynamic defaults) lists those only: at least min.insync.replicas, which the
  controller writes at its first start as Kafka 4.x does at format time. Another broker's id → INVALID_REQUEST.
- configuration_keys narrows the list (null: all); other resource types → INVALID_REQUEST. Documentation is sent
  empty; broker settings that are no topic config's synonym have config_type UNKNOWN (GAPS.md).
  offset.metadata.max.bytes is shown (4096, DEFAULT_CONFIG): the limit OffsetCommit enforces, fixed here.
- error_message is "" for a described resource and for an unknown topic (Kafka leaves the field at its schema
  default there), the reason for the others.
"""
from __future__ import annotations

from typing import Any

from kafka.protocol.admin import DescribeConfigsRequest, DescribeConfigsResponse

from ..config import DEFAULTS, DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG, DYNAMIC_KEYS
from ..context import BrokerContext
from ..registry import handles
from ..topic_config import (
    BROKER_SYNONYMS,
    DEFAULT_CONFIG,
    KAFKA_TOPIC_CONFIGS,
    STATIC_BROKER_CONFIG,
    config_text,
    topic_config_entries,
)
from .offset_commit import MAX_METADATA

API_KEY = 32
VERSIONS = (1, 4)                # Kafka 4.x dropped v0 (KIP-896)

TOPIC, BROKER = 2, 4
# settings the broker has but cannot be given (GAPS.md): shown as Kafka's defaults
FIXED = {"offset.metadata.max.bytes": MAX_METADATA}
UNKNOWN_TOPIC_OR_PARTITION, INVALID_REQUEST = 3, 42
Result = DescribeConfigsResponse.DescribeConfigsResult
Entry = Result.DescribeConfigsResourceResult


# DescribeConfigsResponse config_type (ConfigDef.Type)
CONFIG_TYPES = {"boolean": 1, "string": 2, "int": 3, "long": 5, "double": 6, "list": 7}


Synonym = Entry.DescribeConfigsSynonym
# the broker configs Kafka names as topic configs' synonyms (log.retention.ms, ...), with their type
SYNONYM_TYPES = {syn[0]: KAFKA_TOPIC_CONFIGS[k].type for k, syn in BROKER_SYNONYMS.items()}


def _entry(name: str, value: Any, source: int, read_only: bool, config_type: int = 0,
           synonyms: list[tuple[str, Any, int]] | None = None, sensitive: bool = False) -> Entry:
    return Entry(name=name, value=None if sensitive else config_text(value), read_only=read_only,
                 config_source=source, is_default=source == DEFAULT_CONFIG, is_sensitive=sensitive,
                 synonyms=[Synonym(name=n, value=None if sensitive else config_text(v), source=s)
                           for n, v, s in synonyms or []],
                 config_type=config_type, documentation=None)


def _topic(b, name: str) -> tuple[int, str | None, list[Entry]]:
    t = b.image.topics.get(name)
    if t is None:
        return UNKNOWN_TOPIC_OR_PARTITION, "", []   # Kafka sets no message here: the schema default ""
    return 0, "", [_entry(k, v, source, False, CONFIG_TYPES[KAFKA_TOPIC_CONFIGS[k].type], synonyms)
                   for k, v, source, synonyms in topic_config_entries(t.configs, b.config, as_stored=False)]


def _broker_synonyms(b, key: str, dynamic: dict, defaults: dict) -> list[tuple[str, Any, int]]:
    """Kafka's order: this broker's dynamic value, the cluster default, the static setting, the default."""
    out: list[tuple[str, Any, int]] = []
    if key in dynamic:
        out.append((key, dynamic[key], DYNAMIC_BROKER_CONFIG))
    if key in defaults:
        out.append((key, defaults[key], DYNAMIC_DEFAULT_BROKER_CONFIG))
    if key in DEFAULTS:
        if b.config.static(key) != DEFAULTS[key][1]:
            out.append((key, b.config.static(key), STATIC_BROKER_CONFIG))
        out.append((key, DEFAULTS[key][1], DEFAULT_CONFIG))
    return out


def _dynamic_entry(key: str, value: Any, source: int, synonyms: list) -> Entry:
    """A broker config entry: ours (read-only unless Kafka changes it at run time), a Kafka log config that is a
    topic config's synonym (dynamic in Kafka: its type known), or a name Kafka does not know, shown as sensitive
    with its value hidden (ConfigHelper: a config of unknown type)."""
    if key in DEFAULTS:
        return _entry(key, value, source, key not in DYNAMIC_KEYS, CONFIG_TYPES.get(SYNONYM_TYPES.get(key, ""), 0),
                      synonyms=synonyms)
    if key in SYNONYM_TYPES:
        return _entry(key, value, source, False, CONFIG_TYPES[SYNONYM_TYPES[key]], synonyms=synonyms)
    return _entry(key, value, source, True, synonyms=synonyms, sensitive=True)


def _broker(b, name: str) -> tuple[int, str | None, list[Entry]]:
    if name not in ("", str(b.node_id)):
        return INVALID_REQUEST, f"unexpected broker id, expected {b.node_id} or empty string, but received {name}", []
    defaults = {k: v for k, v in b.image.broker_configs.get("", {}).items() if v is not None}
    if name == "":
        # the cluster-wide dynamic defaults (DynamicBrokerConfig.currentDynamicDefaultConfigs)
        return 0, "", sorted((_dynamic_entry(k, v, DYNAMIC_DEFAULT_BROKER_CONFIG,
                                             [(k, v, DYNAMIC_DEFAULT_BROKER_CONFIG)])
                              for k, v in defaults.items()), key=lambda e: e.name)
    dynamic = {k: v for k, v in b.image.broker_configs.get(str(b.node_id), {}).items() if v is not None}
    entries = []
    for key in sorted(set(DEFAULTS) | set(dynamic) | set(defaults)):
        synonyms = _broker_synonyms(b, key, dynamic, defaults)
        _, value, source = synonyms[0]
        entries.append(_dynamic_entry(key, value, source, synonyms))
    entries += [_entry(k, v, DEFAULT_CONFIG, True, synonyms=[(k, v, DEFAULT_CONFIG)]) for k, v in FIXED.items()]
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
        if not req.include_synonyms:
            for e in entries:
                e.synonyms = []
        results.append(Result(error_code=err, error_message=msg, resource_type=r.resource_type,
                              resource_name=r.resource_name, configs=entries))
    return DescribeConfigsResponse(throttle_time_ms=0, results=results)
