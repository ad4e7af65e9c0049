"""Topic names and topic-level configs: Kafka's Topic.validate and LogConfig rules, shared by controller and broker."""
from __future__ import annotations

import re
from typing import Any

_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]+$")
MAX_TOPIC_NAME = 249

# Topic-level configs the broker honours or stores, with the broker config each one overrides (Kafka's
# LogConfig names). Values of numeric keys must parse as integers.
TOPIC_CONFIGS: dict[str, str | None] = {
    "min.insync.replicas": "min.insync.replicas",
    "max.message.bytes": "message.max.bytes",
    "segment.bytes": "log.segment.bytes",
    "unclean.leader.election.enable": "unclean.leader.election.enable",
    "cleanup.policy": None,
    "retention.ms": None,
    "retention.bytes": None,
    "message.timestamp.type": None,
    "compression.type": None,
}
# Kafka's defaults of the stored-only topic configs (no broker setting of ours maps to them)
STORED_DEFAULTS: dict[str, Any] = {"cleanup.policy": "delete", "retention.ms": 604_800_000, "retention.bytes": -1,
                                   "message.timestamp.type": "CreateTime", "compression.type": "producer"}
# config_source ids (DescribeConfigs / CreateTopics v5+): ConfigSource in Kafka's clients
DYNAMIC_TOPIC_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 1, 4, 5
NUMERIC_TOPIC_CONFIGS = {"min.insync.replicas", "max.message.bytes", "segment.bytes", "retention.ms",
                         "retention.bytes"}
BOOL_TOPIC_CONFIGS = {"unclean.leader.election.enable"}


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


INT32, INT64 = (-(1 << 31), (1 << 31) - 1), (-(1 << 63), (1 << 63) - 1)
# Kafka 4.x LogConfig validators of the configs above: (type range, at least) and the allowed words.
NUMERIC_RANGES: dict[str, tuple[tuple[int, int], int | None]] = {
    "min.insync.replicas": (INT32, 1), "max.message.bytes": (INT32, 0), "segment.bytes": (INT32, 1 << 20),
    "retention.ms": (INT64, -1), "retention.bytes": (INT64, None)}
CHOICES = {"message.timestamp.type": ("CreateTime", "LogAppendTime"),
           "compression.type": ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")}
CLEANUP_POLICIES = ("compact", "delete")


def config_error(configs: dict[str, str | None]) -> str | None:
    """Why a CreateTopics config set is invalid (INVALID_CONFIG), or None: Kafka 4.x LogConfig's validators (types,
    ranges — segment.bytes at least 1 MiB since 4.0 —, allowed words) for the configs this broker knows."""
    for key, value in configs.items():
        if key not in TOPIC_CONFIGS:
            return f"Unknown topic config name: {key}"
        if value is None:
            return f"Null value not supported for topic configs: {key}"
        text = str(value).strip()
        if key in NUMERIC_RANGES:
            (lo, hi), least = NUMERIC_RANGES[key]
            try:
                n = int(text)
            except ValueError:
                n = None
            if n is None or not lo <= n <= hi:
                return f"Invalid value {value} for configuration {key}: Not a number of type " + (
                    "INT" if hi == INT32[1] else "LONG")
            if least is not None and n < least:
                return f"Invalid value {value} for configuration {key}: Value must be at least {least}"
        elif key in BOOL_TOPIC_CONFIGS and text.lower() not in ("true", "false"):
            return f"Invalid value {value} for configuration {key}: Expected value to be either true or false"
        elif key in CHOICES and text not in CHOICES[key]:
            return f"Invalid value {value} for configuration {key}: String must be one of: {', '.join(CHOICES[key])}"
        elif key == "cleanup.policy" and any(p.strip() not in CLEANUP_POLICIES for p in text.split(",") if p.strip()):
            return (f"Invalid value {value} for configuration {key}: String must be one of: "
                    f"{', '.join(CLEANUP_POLICIES)}")
    return None


def topic_setting(configs: dict[str, str], broker_config: Any, key: str) -> Any:
    """A topic config if the topic overrides it, else the broker default it maps to (Kafka's LogConfig)."""
    if key in configs:
        if key in NUMERIC_TOPIC_CONFIGS:
            return int(configs[key])
        if key in BOOL_TOPIC_CONFIGS:
            return str(configs[key]).lower() == "true"
        return configs[key]
    return broker_config[TOPIC_CONFIGS[key]]


def config_text(value: Any) -> str | None:
    """A config value as Kafka shows it (booleans lower-case)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def effective_topic_configs(configs: dict[str, str], broker_config: Any) -> list[tuple[str, str | None, int]]:
    """(name, value, config_source) of every topic config this broker knows, sorted by name: the topic's override
    (DYNAMIC_TOPIC_CONFIG), else the broker setting it maps to (STATIC_BROKER_CONFIG when set at start, else
    DEFAULT_CONFIG), else Kafka's default. What DescribeConfigs (TOPIC) and CreateTopics v5+ answer
    (ConfigHelper.createTopicConfigEntry; ConfigurationControlManager.computeEffectiveTopicConfigs)."""
    from .config import DEFAULTS

    out = []
    for key in sorted(TOPIC_CONFIGS):
        broker_key = TOPIC_CONFIGS[key]
        if key in configs:
            value, source = topic_setting(configs, broker_config, key), DYNAMIC_TOPIC_CONFIG
        elif broker_key is not None:
            value = broker_config[broker_key]
            source = DEFAULT_CONFIG if value == DEFAULTS[broker_key][1] else STATIC_BROKER_CONFIG
        else:
            value, source = STORED_DEFAULTS.get(key), DEFAULT_CONFIG
        out.append((key, config_text(value), source))
    return out
