"""Config changes on the controller: IncrementalAlterConfigs (KIP-339) and AlterConfigs for topics and brokers.

Why here: Kafka's ConfigurationControlManager turns a validated change into ConfigRecords in the metadata log, so
every broker applies the same change in the same order and a restart replays it; the reference does the same with
its ``config`` record (metadata/records.py). Kept beside, not inside, QuorumController: it only needs the image,
the broker config and ``_commit``.

Rules, as Kafka 4.4.0 answers them (each seen on a 3-node Kafka 4.4.0 cluster with validate_only requests):
- TOPIC: Topic.validate name (INVALID_TOPIC_EXCEPTION), existence (UNKNOWN_TOPIC_OR_PARTITION "The topic 'x' does
  not exist."), APPEND/SUBTRACT only on LIST configs (INVALID_CONFIG "Can't APPEND to key K because its type is not
  LIST.", checked before the name is known), then the resulting override set is validated as CreateTopics does
  (topic_config.config_error: unknown name, value type and range, cross-config checks → INVALID_CONFIG). APPEND
  starts from the effective value (the default when not overridden: "delete" + "compact" is "delete,compact") and
  adds what is missing; SUBTRACT removes; DELETE of an absent or unknown name is no error.
- BROKER ("<id>" or "" for the cluster default): a Kafka broker config that is not dynamic → INVALID_REQUEST
  "Cannot update these configs dynamically: [k]"; APPEND/SUBTRACT on a non-list broker config → INVALID_CONFIG
  "Config value append is not allowed for config key: k"; min.insync.replicas per broker → INVALID_CONFIG (ELR is
  enabled in a Kafka 4.x cluster); values of the configs the reference knows are type- and range-checked; other
  names are stored as Kafka stores them (DescribeConfigs shows them as sensitive, value hidden).
- AlterConfigs (legacy) replaces the resource's whole set: names not given are removed.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kafka import errors as E

from ..config import DEFAULTS, DYNAMIC_KEYS, REFERENCE_ONLY_KEYS
from ..metadata.image import BROKER_RESOURCE, TOPIC_RESOURCE
from ..topic_config import (
    KAFKA_TOPIC_CONFIGS,
    TopicConfigDef,
    _Invalid,
    _parse,
    config_error,
    topic_name_error,
)

if TYPE_CHECKING:
    from .quorum_controller import QuorumController

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
OP_NAMES = {APPEND: "APPEND", SUBTRACT: "SUBTRACT"}

# Type and validator of the dynamic broker configs the reference honours (KafkaConfig's definitions)
BROKER_DEFS: dict[str, TopicConfigDef] = {
    "log.segment.bytes": TopicConfigDef("int", str(1 << 30), 14),
    "log.index.interval.bytes": TopicConfigDef("int", "4096", 0),
    "log.flush.interval.messages": TopicConfigDef("long", str((1 << 63) - 1), 1),
    "log.flush.interval.ms": TopicConfigDef("long", str((1 << 63) - 1)),
    "message.max.bytes": TopicConfigDef("int", "1048588", 0),
    "min.insync.replicas": TopicConfigDef("int", "1", 1),
    "unclean.leader.election.enable": TopicConfigDef("boolean", "false"),
    "producer.id.expiration.ms": TopicConfigDef("int", "86400000", 1),
    "transaction.partition.verification.enable": TopicConfigDef("boolean", "true"),
}
# Kafka broker configs the reference does not have that an operator may try to change (Kafka: static, refused)
KAFKA_STATIC_CONFIGS = frozenset({"log.dirs", "log.dir", "listeners", "process.roles", "node.id", "broker.id",
                                  "controller.listener.names", "controller.quorum.voters",
                                  "controller.quorum.bootstrap.servers", "inter.broker.listener.name",
                                  "listener.security.protocol.map", "num.network.threads", "metadata.log.dir"})
Change = tuple[str, int, "str | None"]          # (name, operation, value)


def topic_name_message(name: str) -> str:
    """Kafka's InvalidTopicException words for an illegal name (Topic.validate)."""
    why = topic_name_error(name)
    if why and "characters outside" in why:
        return (f"Topic name is invalid: '{name}' contains one or more characters other than ASCII alphanumerics, "
                f"'.', '_' and '-'")
    return f"Topic name is invalid: {why}"


def _items(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


def _topic_base(c: QuorumController, configs: dict[str, str], key: str) -> str:
    """The value APPEND/SUBTRACT start from: the override, else a dynamic broker synonym, else the default."""
    if key in configs:
        return configs[key]
    from ..topic_config import BROKER_SYNONYMS
    syn = BROKER_SYNONYMS.get(key)
    if syn is not None:
        dyn = c.config.dynamic(syn[0])
        if dyn is not None and dyn[0] is not None:
            return dyn[0]
    return KAFKA_TOPIC_CONFIGS[key].default


def alter_topic(c: QuorumController, name: str, changes: list[Change], validate_only: bool, replace: bool = False
                ) -> tuple[int, str | None, list[dict]]:
    """(error, message, records) of one TOPIC resource."""
    if topic_name_error(name):
        return E.InvalidTopicError.errno, topic_name_message(name), []
    t = c.image.topics.get(name)
    if t is None:
        return E.UnknownTopicOrPartitionError.errno, f"The topic '{name}' does not exist.", []
    old = dict(t.configs)
    new = {} if replace else dict(old)
    for key, op, value in changes:
        if op == SET:
            new[key] = value
        elif op == DELETE:
            new.pop(key, None)
        else:
            d = KAFKA_TOPIC_CONFIGS.get(key)
            if d is None or d.type != "list":
                return (E.InvalidConfigurationError.errno,
                        f"Can't {OP_NAMES[op]} to key {key} because its type is not LIST.", [])
            items = _items(_topic_base(c, new, key))
            given = _items(value or "")
            if op == APPEND:
                items += [x for x in given if x not in items]
            else:
                items = [x for x in items if x not in given]
            if key in new or items != _items(_topic_base(c, new, key)):
                new[key] = ",".join(items)
    why = config_error(new)
    if why and _fault(c, "configs.accept_invalid_value"):
        why = next((f"Unknown topic config name: {k}" for k in new if k not in KAFKA_TOPIC_CONFIGS), None)
    if why:
        return E.InvalidConfigurationError.errno, why, []
    if validate_only:
        return 0, None, []
    records = [{"type": "config", "resource_type": TOPIC_RESOURCE, "resource_name": name, "name": k,
                "value": new.get(k)} for k in sorted(set(old) | set(new)) if old.get(k) != new.get(k)]
    return 0, None, records


def alter_broker(c: QuorumController, name: str, changes: list[Change], validate_only: bool, replace: bool = False
                 ) -> tuple[int, str | None, list[dict]]:
    """(error, message, records) of one BROKER resource ("" = the cluster default); the receiving broker checked
    that a named broker is itself."""
    static = [k for k, op, _ in changes if op != DELETE and k in DEFAULTS and k not in DYNAMIC_KEYS
              and k not in REFERENCE_ONLY_KEYS or k in KAFKA_STATIC_CONFIGS]
    if static:
        return E.InvalidRequestError.errno, f"Cannot update these configs dynamically: [{', '.join(static)}]", []
    old = dict(c.image.broker_configs.get(name, {}))
    new: dict[str, Any] = {} if replace else dict(old)
    for key, op, value in changes:
        if op in (APPEND, SUBTRACT):
            return (E.InvalidConfigurationError.errno,
                    f"Config value {OP_NAMES[op].lower()} is not allowed for config key: {key}", [])
        if key == "min.insync.replicas" and name != "" and op != DELETE:
            return (E.InvalidConfigurationError.errno,
                    "Broker-level min.insync.replicas cannot be altered while ELR is enabled.", [])
        if op == DELETE:
            new.pop(key, None)
            continue
        d = BROKER_DEFS.get(key)
        if d is not None:
            try:
                _parse(key, d, str(value))
            except _Invalid as e:
                return E.InvalidRequestError.errno, e.message(key), []
        new[key] = value
    if validate_only:
        return 0, None, []
    return 0, None, [{"type": "config", "resource_type": BROKER_RESOURCE, "resource_name": name, "name": k,
                      "value": new.get(k)} for k in sorted(set(old) | set(new)) if old.get(k) != new.get(k)]


def alter(c: QuorumController, resource_type: int, name: str, changes: list[Change], validate_only: bool,
          replace: bool = False) -> tuple[int, str | None]:
    """Validate one resource's change and commit its records (nothing on an error or validate_only); ``replace``:
    AlterConfigs, the given set replaces the resource's configs."""
    fn = alter_topic if resource_type == TOPIC_RESOURCE else alter_broker
    if validate_only and _fault(c, "configs.validate_only_applies"):
        validate_only = False
    err, msg, records = fn(c, name, changes, validate_only, replace)
    if err == 0 and records:
        c._commit(records)
    return err, msg


APPLY_WAIT_S = 5.0


async def alter_resources(c: QuorumController, resources: list[tuple[int, str, list[Change]]], validate_only: bool,
                          replace: bool) -> list[tuple[int, str | None]]:
    """AlterConfigs and IncrementalAlterConfigs alike: each (resource type, name, changes) altered, then (unless
    ``validate_only``) answered once Raft committed the records (a resource whose change was not committed, because
    this controller was deposed, answers NOT_CONTROLLER) and the live brokers applied them (bounded wait)."""
    out = [alter(c, kind, name, changes, validate_only, replace) for kind, name, changes in resources]
    if not validate_only:
        # wait_applied alone compares with the committed offset, which an uncommitted change is not part of yet
        if not await c.wait_committed():
            out = [(E.NotControllerError.errno, None) if err == 0 else (err, msg) for err, msg in out]
        await c.wait_applied(c.end_offset, APPLY_WAIT_S)
    return out


def _fault(c: QuorumController, name: str) -> bool:
    return c.faults is not None and c.faults.on(name)


def ensure_cluster_defaults(c: QuorumController) -> None:
    """Kafka 4.x (ELR enabled) keeps min.insync.replicas as a cluster-level dynamic config, written when the
    cluster is formatted: DescribeConfigs shows it as DYNAMIC_DEFAULT_BROKER_CONFIG on every topic and broker. The
    reference writes the same record once, from the controller's static setting."""
    if "min.insync.replicas" not in c.image.broker_configs.get("", {}):
        c._commit([{"type": "config", "resource_type": BROKER_RESOURCE, "resource_name": "",
                    "name": "min.insync.replicas", "value": str(c.config.static("min.insync.replicas"))}])
