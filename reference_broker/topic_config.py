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
