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


def config_error(configs: dict[str, str]) -> str | None:
    """Why a CreateTopics config set is invalid (INVALID_CONFIG), or None."""
    for key, value in configs.items():
        if key not in TOPIC_CONFIGS:
            return f"Unknown topic config name: {key}"
        if key in NUMERIC_TOPIC_CONFIGS:
            try:
                int(value)
            except (TypeError, ValueError):
                return f"Invalid value {value} for configuration {key}"
        if key in BOOL_TOPIC_CONFIGS and str(value).lower() not in ("true", "false"):
            return f"Invalid value {value} for configuration {key}: expected true or false"
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
