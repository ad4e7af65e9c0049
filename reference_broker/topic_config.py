"""Topic names and topic-level configs: Kafka's Topic.validate and LogConfig rules, shared by controller and broker.

One catalogue (KAFKA_TOPIC_CONFIGS: every topic config of Apache Kafka 4.4.0 with its ConfigDef type, default and
validator) serves the three places Kafka uses LogConfig's definition: CreateTopics validation (config_error, with
Kafka's messages), the effective configs CreateTopics v5+ and DescribeConfigs answer (effective_topic_configs), and
the values the broker acts on (topic_setting).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal
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
# config_source ids (DescribeConfigs / CreateTopics v5+): ConfigSource in Kafka's clients
DYNAMIC_TOPIC_CONFIG, DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = (
    1, 2, 3, 4, 5)

INT_MAX = (1 << 31) - 1
LONG_MAX = (1 << 63) - 1
_COMPRESSION = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")


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
# bounds its CreateTopics enforces (checked against 4.4.0 with validate_only requests), in LogConfig's definition
# order: the order ConfigDef.parse checks values in, so the first bad one is the one Kafka names. The broker honours
# those in TOPIC_CONFIGS; the others are validated and stored, and DescribeConfigs shows them (GAPS.md: retention and
# compaction are not enforced).
KAFKA_TOPIC_CONFIGS: dict[str, TopicConfigDef] = {
    "segment.bytes": TopicConfigDef("int", "1073741824", 1048576),
    "segment.ms": TopicConfigDef("long", "604800000", 1),
    "segment.jitter.ms": TopicConfigDef("long", "0", 0),
    "segment.index.bytes": TopicConfigDef("int", "10485760", 4),
    "flush.messages": TopicConfigDef("long", str(LONG_MAX), 1),
    "flush.ms": TopicConfigDef("long", str(LONG_MAX), 0),
    "retention.bytes": TopicConfigDef("long", "-1"),
    "retention.ms": TopicConfigDef("long", "604800000", -1),
    "max.message.bytes": TopicConfigDef("int", "1048588", 0),
    "max.decompressed.message.bytes": TopicConfigDef("int", "2147483639", 1),
    "index.interval.bytes": TopicConfigDef("int", "4096", 0),
    "delete.retention.ms": TopicConfigDef("long", "86400000", 0),
    "min.compaction.lag.ms": TopicConfigDef("long", "0", 0),
    "max.compaction.lag.ms": TopicConfigDef("long", str(LONG_MAX), 1),
    "file.delete.delay.ms": TopicConfigDef("long", "60000", 0),
    "min.cleanable.dirty.ratio": TopicConfigDef("double", "0.5", 0, 1),
    "cleanup.policy": TopicConfigDef("list", "delete", one_of=("compact", "delete")),
    "unclean.leader.election.enable": TopicConfigDef("boolean", "false"),
    "min.insync.replicas": TopicConfigDef("int", "1", 1),
    "compression.type": TopicConfigDef("string", "producer", one_of=_COMPRESSION),
    "compression.gzip.level": TopicConfigDef("int", "-1", 1, 9, also=(-1,)),
    "compression.lz4.level": TopicConfigDef("int", "9", 1, 17),
    "compression.zstd.level": TopicConfigDef("int", "3", -131072, 22),
    "preallocate": TopicConfigDef("boolean", "false"),
    "message.timestamp.type": TopicConfigDef("string", "CreateTime", one_of=("CreateTime", "LogAppendTime")),
    "message.timestamp.before.max.ms": TopicConfigDef("long", str(LONG_MAX), 0),
    "message.timestamp.after.max.ms": TopicConfigDef("long", "3600000", 0),
    "leader.replication.throttled.replicas": TopicConfigDef("list", ""),
    "follower.replication.throttled.replicas": TopicConfigDef("list", ""),
    "remote.storage.enable": TopicConfigDef("boolean", "false"),
    "local.retention.ms": TopicConfigDef("long", "-2", -2),
    "local.retention.bytes": TopicConfigDef("long", "-2", -2),
    "remote.log.copy.disable": TopicConfigDef("boolean", "false"),
    "remote.copy.lag.ms": TopicConfigDef("long", "0"),
    "remote.copy.lag.bytes": TopicConfigDef("long", "-1", -1),
    "remote.log.delete.on.disable": TopicConfigDef("boolean", "false"),
    "errors.deadletterqueue.group.enable": TopicConfigDef("boolean", "false"),
}
# topic config -> (broker config whose dynamic value it takes, the synonym DescribeConfigs lists as its
# DEFAULT_CONFIG, that synonym's default): ServerTopicConfigSynonyms as Kafka 4.4.0's DescribeConfigs shows them
# (retention.ms takes log.retention.ms, whose default is given as log.retention.hours=168). Configs not listed have
# no broker synonym in Kafka's answer.
_L = str(LONG_MAX)
BROKER_SYNONYMS: dict[str, tuple[str, str, str]] = {
    "compression.type": ("compression.type", "compression.type", "producer"),
    "remote.copy.lag.bytes": ("log.remote.copy.lag.bytes", "log.remote.copy.lag.bytes", "-1"),
    "min.insync.replicas": ("min.insync.replicas", "min.insync.replicas", "1"),
    "local.retention.ms": ("log.local.retention.ms", "log.local.retention.ms", "-2"),
    "cleanup.policy": ("log.cleanup.policy", "log.cleanup.policy", "delete"),
    "compression.lz4.level": ("compression.lz4.level", "compression.lz4.level", "9"),
    "segment.bytes": ("log.segment.bytes", "log.segment.bytes", "1073741824"),
    "retention.ms": ("log.retention.ms", "log.retention.hours", "168"),
    "compression.gzip.level": ("compression.gzip.level", "compression.gzip.level", "-1"),
    "remote.copy.lag.ms": ("log.remote.copy.lag.ms", "log.remote.copy.lag.ms", "0"),
    "flush.messages": ("log.flush.interval.messages", "log.flush.interval.messages", _L),
    "compression.zstd.level": ("compression.zstd.level", "compression.zstd.level", "3"),
    "max.compaction.lag.ms": ("log.cleaner.max.compaction.lag.ms", "log.cleaner.max.compaction.lag.ms", _L),
    "file.delete.delay.ms": ("log.segment.delete.delay.ms", "log.segment.delete.delay.ms", "60000"),
    "max.message.bytes": ("message.max.bytes", "message.max.bytes", "1048588"),
    "min.compaction.lag.ms": ("log.cleaner.min.compaction.lag.ms", "log.cleaner.min.compaction.lag.ms", "0"),
    "message.timestamp.type": ("log.message.timestamp.type", "log.message.timestamp.type", "CreateTime"),
    "local.retention.bytes": ("log.local.retention.bytes", "log.local.retention.bytes", "-2"),
    "preallocate": ("log.preallocate", "log.preallocate", "false"),
    "index.interval.bytes": ("log.index.interval.bytes", "log.index.interval.bytes", "4096"),
    "min.cleanable.dirty.ratio": ("log.cleaner.min.cleanable.ratio", "log.cleaner.min.cleanable.ratio", "0.5"),
    "unclean.leader.election.enable": ("unclean.leader.election.enable", "unclean.leader.election.enable", "false"),
    "retention.bytes": ("log.retention.bytes", "log.retention.bytes", "-1"),
    "delete.retention.ms": ("log.cleaner.delete.retention.ms", "log.cleaner.delete.retention.ms", "86400000"),
    "message.timestamp.after.max.ms": ("log.message.timestamp.after.max.ms", "log.message.timestamp.after.max.ms",
                                       "3600000"),
    "max.decompressed.message.bytes": ("max.decompressed.message.bytes", "max.decompressed.message.bytes",
                                       "2147483639"),
    "message.timestamp.before.max.ms": ("log.message.timestamp.before.max.ms",
                                        "log.message.timestamp.before.max.ms", _L),
    "segment.index.bytes": ("log.index.size.max.bytes", "log.index.size.max.bytes", "10485760"),
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


# --- ConfigDef parsing, as Java does it (String.trim, Integer/Long/Double.parseDouble, the LIST split) ---------------

_INTEGER = re.compile(r"[+-]?[0-9]+")
_DOUBLE = re.compile(r"[+-]?(NaN|Infinity|([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?[fFdD]?)")
_LIST_SPLIT = re.compile(r"[ \t\n\x0b\f\r]*,[ \t\n\x0b\f\r]*")
_THROTTLED_ITEM = re.compile(r"([0-9]+:[0-9]+)?")


class _Invalid(Exception):
    """A ConfigException: the value Kafka names in its message and why."""

    def __init__(self, shown: str, why: str, bare: bool = False) -> None:
        super().__init__(why)
        self.shown, self.why, self.bare = shown, why, bare

    def message(self, key: str) -> str:
        """ConfigException(name, value, why) words, or the bare message of ConfigException(why)."""
        return self.why if self.bare else f"Invalid value {self.shown} for configuration {key}: {self.why}"


def _java_trim(text: str) -> str:
    """String.trim: strips characters up to U+0020 (Python's strip() also strips Unicode spaces)."""
    return text.strip("".join(chr(c) for c in range(0x21)))


def java_double(x: float) -> str:
    """Double.toString: plain between 10^-3 and 10^7 (always with a fraction digit), else d.dddE±n."""
    if x != x:
        return "NaN"
    if x in (float("inf"), float("-inf")):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0 or 1e-3 <= abs(x) < 1e7:
        return repr(x)                          # shortest round-trip digits, as JDK 19+ prints them
    sign, digits, exp = Decimal(repr(x)).as_tuple()
    ds = "".join(map(str, digits)).rstrip("0") or "0"
    e = len(digits) - 1 + int(exp)
    return f"{'-' if sign else ''}{ds[0]}.{ds[1:] or '0'}E{e}"


def _parse(key: str, d: TopicConfigDef, value: str) -> Any:
    """ConfigDef.parseType then the key's validator; raises _Invalid with Kafka's wording."""
    v = _java_trim(value)
    if d.type == "boolean":
        if v.lower() not in ("true", "false"):
            raise _Invalid(value, "Expected value to be either true or false")
        return v.lower() == "true"
    if d.type == "string":
        if d.one_of and v not in d.one_of:
            raise _Invalid(v, f"String must be one of: {', '.join(d.one_of)}")
        return v
    if d.type == "list":
        items = _LIST_SPLIT.split(v) if v else []
        for item in items if d.one_of else ():               # ValidList, item by item
            if not item:
                raise _Invalid("", f"Configuration '{key}' values must not be empty.", bare=True)
            if item not in d.one_of:
                raise _Invalid(item, f"String must be one of: {', '.join(d.one_of)}")
        if key.endswith("replication.throttled.replicas"):    # ThrottledReplicaListValidator
            stripped = [_java_trim(x) for x in items]
            if not (all(_THROTTLED_ITEM.fullmatch(x) for x in stripped) or "".join(stripped) == "*"):
                raise _Invalid(f"[{', '.join(items)}]",
                               f"{key} must be the literal '*' or a list of replicas in the following format: "
                               f"[partitionId]:[brokerId],[partitionId]:[brokerId],...")
        return items
    n: float
    if d.type == "double":
        if not _DOUBLE.fullmatch(v):
            raise _Invalid(value, "Not a number of type DOUBLE")
        n = float(v.rstrip("fFdD").replace("Infinity", "inf"))
        shown = java_double(n)
    else:
        limit = INT_MAX if d.type == "int" else LONG_MAX
        if not _INTEGER.fullmatch(v) or not -limit - 1 <= int(v) <= limit:
            raise _Invalid(value, f"Not a number of type {d.type.upper()}")
        n = int(v)
        shown = str(n)
    if n in d.also:
        return n
    if d.also and d.at_least is not None and d.at_most is not None and not d.at_least <= n <= d.at_most:
        raise _Invalid(shown, f"Value must be between {_num(d.at_least)} and {_num(d.at_most)} or equal to "
                              f"{d.also[0]}")
    if d.at_least is not None and n < d.at_least:
        raise _Invalid(shown, f"Value must be at least {_num(d.at_least)}")
    if d.at_most is not None and n > d.at_most:
        raise _Invalid(shown, f"Value must be no more than {_num(d.at_most)}")
    return n


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


def config_error(configs: dict[str, str | None]) -> str | None:
    """Why a CreateTopics config set is invalid (INVALID_CONFIG), or None, in the order and words of Kafka 4.4.0:
    null values (ControllerConfigurationValidator), unknown names (LogConfig.validateNames), each value's type and
    validator in LogConfig's definition order (ConfigDef.parse: "Invalid value X for configuration K: why"; ValidList:
    "Configuration 'K' values must not be empty."), then the checks across configs
    (LogConfig.validateValues, tiered storage disabled in the broker)."""
    nulls = [k for k, v in configs.items() if v is None]
    if nulls:
        return f"Null value not supported for topic configs: {','.join(nulls)}"
    for key in configs:
        if key not in KAFKA_TOPIC_CONFIGS:
            return f"Unknown topic config name: {key}"
    parsed = {}
    for key, d in KAFKA_TOPIC_CONFIGS.items():              # definition order, as ConfigDef.parse
        if key in configs:
            try:
                parsed[key] = _parse(key, d, str(configs[key]))
            except _Invalid as e:
                return e.message(key)
    lo = parsed.get("min.compaction.lag.ms", int(KAFKA_TOPIC_CONFIGS["min.compaction.lag.ms"].default))
    hi = parsed.get("max.compaction.lag.ms", int(KAFKA_TOPIC_CONFIGS["max.compaction.lag.ms"].default))
    if lo > hi:
        return f"conflict topic config setting min.compaction.lag.ms ({lo}) > max.compaction.lag.ms ({hi})"
    if parsed.get("remote.storage.enable"):
        return ("Tiered Storage functionality is disabled in the broker. Topic cannot be configured with remote "
                "log storage.")
    return None


def canonical(key: str, value: str) -> str:
    """A valid stored value as Kafka's DescribeConfigs shows it (parsed, then ConfigDef.convertToString: "TRUE" is
    "true", " 5000 " is "5000", "compact, delete" is "compact,delete", "0.50" is "0.5")."""
    d = KAFKA_TOPIC_CONFIGS[key]
    try:
        parsed = _parse(key, d, value)
    except _Invalid:
        return value                            # refused at creation; not reached for a stored topic
    if d.type == "list":
        return ",".join(parsed)
    if d.type == "double":
        return java_double(parsed)
    return config_text(parsed)


def topic_setting(configs: dict[str, str], broker_config: Any, key: str) -> Any:
    """A topic config if the topic overrides it, else the broker default it maps to (Kafka's LogConfig), else
    Kafka's default for it; typed (int, bool, float, list of str, str)."""
    if key in configs:
        value = str(configs[key])
    elif TOPIC_CONFIGS.get(key) is not None:
        return broker_config[TOPIC_CONFIGS[key]]
    else:
        value = KAFKA_TOPIC_CONFIGS[key].default
    return _parse(key, KAFKA_TOPIC_CONFIGS[key], value)


def config_text(value: Any) -> str | None:
    """A config value as Kafka shows it (booleans lower-case)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def effective_topic_configs(configs: dict[str, str], broker_config: Any, *, as_stored: bool = True
                            ) -> list[tuple[str, str | None, int, str]]:
    """(name, value, config_source, type) of every Kafka topic config, sorted by name: the topic's override
    (DYNAMIC_TOPIC_CONFIG), else a dynamic broker config of its synonym (this broker's, then the cluster default:
    DYNAMIC_BROKER_CONFIG / DYNAMIC_DEFAULT_BROKER_CONFIG), else the broker setting it maps to (STATIC_BROKER_CONFIG
    when set at start, else DEFAULT_CONFIG), else Kafka's default (KafkaConfigSchema.resolveEffectiveTopicConfig).
    CreateTopics v5+ echoes an override as given (``as_stored``: the record's string), DescribeConfigs shows it
    parsed (``canonical``, ConfigHelper.createTopicConfigEntry)."""
    return [(key, value, source, KAFKA_TOPIC_CONFIGS[key].type)
            for key, value, source, _ in topic_config_entries(configs, broker_config, as_stored=as_stored)]


def topic_config_entries(configs: dict[str, str], broker_config: Any, *, as_stored: bool = True
                         ) -> list[tuple[str, str | None, int, list[tuple[str, str | None, int]]]]:
    """(name, value, source, synonyms) of every Kafka topic config, sorted by name; synonyms in Kafka's order:
    the override, this broker's and the cluster's dynamic value of the broker synonym, its static setting, its
    default (DescribeConfigs with include_synonyms)."""
    from .config import DEFAULTS

    dynamic = getattr(broker_config, "dynamic", None)
    out = []
    for key, d in sorted(KAFKA_TOPIC_CONFIGS.items()):
        syn = BROKER_SYNONYMS.get(key)
        broker_key = TOPIC_CONFIGS.get(key)
        synonyms: list[tuple[str, str | None, int]] = []
        if key in configs:
            value = str(configs[key]) if as_stored else canonical(key, str(configs[key]))
            synonyms.append((key, value, DYNAMIC_TOPIC_CONFIG))
        if syn is not None:
            dyn = dynamic(syn[0]) if dynamic is not None else None
            if dyn is not None:
                synonyms.append((syn[0], canonical(key, str(dyn[0])) if dyn[0] is not None else None, dyn[1]))
                if dyn[1] == DYNAMIC_BROKER_CONFIG and (dflt := dynamic_default(broker_config, syn[0])) is not None:
                    synonyms.append((syn[0], canonical(key, dflt), DYNAMIC_DEFAULT_BROKER_CONFIG))
            if broker_key is not None and broker_config.static(broker_key) != DEFAULTS[broker_key][1]:
                synonyms.append((broker_key, config_text(broker_config.static(broker_key)), STATIC_BROKER_CONFIG))
            # a default given in another unit (log.retention.hours for retention.ms) is listed only below a value
            # set on the broker side; alone, Kafka 4.4.0 shows the topic default without synonyms
            if syn[1] == syn[0] or len(synonyms) > (1 if key in configs else 0):
                synonyms.append((syn[1], syn[2] if broker_key is None else config_text(DEFAULTS[broker_key][1]),
                                 DEFAULT_CONFIG))
        if synonyms and (synonyms[0][2] != DEFAULT_CONFIG or syn is None or syn[1] == syn[0]):
            _, value, source = synonyms[0]
        else:
            value, source = d.default, DEFAULT_CONFIG
        if syn is None:
            synonyms = synonyms[:1] if key in configs else []
        out.append((key, value, source, synonyms))
    return out


def dynamic_default(broker_config: Any, key: str) -> str | None:
    """The cluster-default dynamic value of a broker config (below this broker's own), or None."""
    image = getattr(broker_config, "_image", None)
    value = (getattr(image, "broker_configs", {}) or {}).get("", {}).get(key)
    return None if value is None else str(value)
