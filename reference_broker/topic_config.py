"""Topic names and topic-level configs: Kafka's Topic.validate and LogConfig rules, shared by controller and broker."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]+$")
MAX_TOPIC_NAME = 249

# Topic-level configs the broker honours, with the broker config each one overrides (Kafka's LogConfig names).
TOPIC_CONFIGS: dict[str, str | None] = {
    "min.insync.replicas": "min.insync.replicas",
    "max.message.bytes": "message.max.bytes",
    "segment.bytes": "log.segment.bytes",
    "unclean.leader.election.enable": "unclean.leader.election.enable",
}

INT_MAX = (1 << 31) - 1
LONG_MAX = (1 << 63) - 1
_COMPRESSION = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
_THROTTLED = re.compile(r"^\s*(\*|(\d+:\d+\s*(,\s*\d+:\d+\s*)*)?)\s*$")


@dataclass(frozen=True)
class TopicConfigDef:
    """One of Kafka's topic configs: its ConfigDef type, default and validator (LogConfig.configDef)."""

    type: str                                   # boolean, string, int, long, double, list
    default: str
    at_least: float | None = None
    at_most: float | None = None
    one_of: tuple[str, ...] = ()
    also: tuple[int, ...] = ()                  # values allowed outside the range (compression.gzip.level -1)


# Every topic config of Apache Kafka 4.4.0 (what its DescribeConfigs lists for a topic), with type, default and the
# bounds its CreateTopics enforces (checked against 4.4.0 with validate_only requests). The broker honours those in
# TOPIC_CONFIGS; the others are validated and stored, and DescribeConfigs shows them (GAPS.md: retention and
# compaction are not enforced).
KAFKA_TOPIC_CONFIGS: dict[str, TopicConfigDef] = {
    "cleanup.policy": TopicConfigDef("list", "delete", one_of=("compact", "delete")),
    "compression.gzip.level": TopicConfigDef("int", "-1", 1, 9, also=(-1,)),
    "compression.lz4.level": TopicConfigDef("int", "9", 1, 17),
    "compression.type": TopicConfigDef("string", "producer", one_of=_COMPRESSION),
    "compression.zstd.level": TopicConfigDef("int", "3", -131072, 22),
    "delete.retention.ms": TopicConfigDef("long", "86400000", 0),
    "errors.deadletterqueue.group.enable": TopicConfigDef("boolean", "false"),
    "file.delete.delay.ms": TopicConfigDef("long", "60000", 0),
    "flush.messages": TopicConfigDef("long", str(LONG_MAX), 1),
    "flush.ms": TopicConfigDef("long", str(LONG_MAX), 0),
    "follower.replication.throttled.replicas": TopicConfigDef("list", ""),
    "index.interval.bytes": TopicConfigDef("int", "4096", 0),
    "leader.replication.throttled.replicas": TopicConfigDef("list", ""),
    "local.retention.bytes": TopicConfigDef("long", "-2", -2),
    "local.retention.ms": TopicConfigDef("long", "-2", -2),
    "max.compaction.lag.ms": TopicConfigDef("long", str(LONG_MAX), 1),
    "max.decompressed.message.bytes": TopicConfigDef("int", "2147483639", 1),
    "max.message.bytes": TopicConfigDef("int", "1048588", 0),
    "message.timestamp.after.max.ms": TopicConfigDef("long", "3600000", 0),
    "message.timestamp.before.max.ms": TopicConfigDef("long", str(LONG_MAX), 0),
    "message.timestamp.type": TopicConfigDef("string", "CreateTime", one_of=("CreateTime", "LogAppendTime")),
    "min.cleanable.dirty.ratio": TopicConfigDef("double", "0.5", 0, 1),
    "min.compaction.lag.ms": TopicConfigDef("long", "0", 0),
    "min.insync.replicas": TopicConfigDef("int", "1", 1),
    "preallocate": TopicConfigDef("boolean", "false"),
    "remote.copy.lag.bytes": TopicConfigDef("long", "-1", -1),
    "remote.copy.lag.ms": TopicConfigDef("long", "0"),
    "remote.log.copy.disable": TopicConfigDef("boolean", "false"),
    "remote.log.delete.on.disable": TopicConfigDef("boolean", "false"),
    "remote.storage.enable": TopicConfigDef("boolean", "false"),
    "retention.bytes": TopicConfigDef("long", "-1"),
    "retention.ms": TopicConfigDef("long", "604800000", -1),
    "segment.bytes": TopicConfigDef("int", "1073741824", 1048576),
    "segment.index.bytes": TopicConfigDef("int", "10485760", 4),
    "segment.jitter.ms": TopicConfigDef("long", "0", 0),
    "segment.ms": TopicConfigDef("long", "604800000", 1),
    "unclean.leader.election.enable": TopicConfigDef("boolean", "false"),
}
NUMERIC_TOPIC_CONFIGS = {k for k, d in KAFKA_TOPIC_CONFIGS.items() if d.type in ("int", "long")}
BOOL_TOPIC_CONFIGS = {k for k, d in KAFKA_TOPIC_CONFIGS.items() if d.type == "boolean"}


def topic_name_error(name: str) -> str | None:
    """Kafka's Topic.validate rules; returns why ``name`` is illegal, or None."""
    if not name:
        return "topic name is empty"
    if name in (".", ".."):
        return f"topic name cannot be {name!r}"
    if len(name) > MAX_TOPIC_NAME:
        return f"topic name is longer than {MAX_TOPIC_NAME} characters"
    if not _LEGAL_TOPIC.match(name):
        return f"topic name {name!r} has characters outside [a-zA-Z0-9._-]"
    return None


def config_error(configs: dict[str, str]) -> str | None:
    """Why a CreateTopics config set is invalid (INVALID_CONFIG), or None; Kafka's LogConfig.validate wording."""
    for key, value in configs.items():
        d = KAFKA_TOPIC_CONFIGS.get(key)
        if d is None:
            return f"Unknown topic config name: {key}"
        why = _value_error(key, d, "" if value is None else str(value))
        if why:
            return f"Invalid value {value} for configuration {key}: {why}"
    if str(configs.get("remote.storage.enable", "false")).strip().lower() == "true":
        return ("Tiered Storage functionality is disabled in the broker. Topic cannot be configured with remote "
                "log storage.")
    return None


def _value_error(key: str, d: TopicConfigDef, text: str) -> str | None:
    """Why ``text`` is not a valid value of ``key`` (ConfigDef parsing, then its validator), or None."""
    v = text.strip()
    if d.type == "boolean":
        return None if v.lower() in ("true", "false") else "Expected value to be either true or false"
    if d.type == "list":
        items = [x.strip() for x in v.split(",")] if v else []
        if d.one_of and any(x not in d.one_of for x in items):
            return f"String must be one of: {', '.join(d.one_of)}"
        if key.endswith("replication.throttled.replicas") and not _THROTTLED.match(v):
            return (f"{key} must be the literal '*' or a list of replicas in the following format: "
                    f"[partitionId]:[brokerId],[partitionId]:[brokerId],...")
        return None
    if d.type == "string":
        return f"String must be one of: {', '.join(d.one_of)}" if d.one_of and v not in d.one_of else None
    n: float
    try:
        n = float(v) if d.type == "double" else int(v)
    except ValueError:
        return f"Not a number of type {d.type.upper()}"
    limit = INT_MAX if d.type == "int" else LONG_MAX
    if d.type != "double" and not -limit - 1 <= n <= limit:
        return f"Not a number of type {d.type.upper()}"
    if n in d.also:
        return None
    if d.also and d.at_least is not None and d.at_most is not None and not d.at_least <= n <= d.at_most:
        return f"Value must be between {_num(d.at_least)} and {_num(d.at_most)} or equal to {d.also[0]}"
    if d.at_least is not None and n < d.at_least:
        return f"Value must be at least {_num(d.at_least)}"
    if d.at_most is not None and n > d.at_most:
        return f"Value must be no more than {_num(d.at_most)}"
    return None


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


def topic_setting(configs: dict[str, str], broker_config: Any, key: str) -> Any:
    """A topic config if the topic overrides it, else the broker default it maps to (Kafka's LogConfig), else
    Kafka's default for it."""
    if key in configs:
        value = str(configs[key]).strip()
    elif TOPIC_CONFIGS.get(key) is not None:
        return broker_config[TOPIC_CONFIGS[key]]
    else:
        value = KAFKA_TOPIC_CONFIGS[key].default
    if key in NUMERIC_TOPIC_CONFIGS:
        return int(value)
    if key in BOOL_TOPIC_CONFIGS:
        return value.lower() == "true"
    return value
