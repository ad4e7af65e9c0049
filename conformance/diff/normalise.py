"""What may legitimately differ between two correct Kafka brokers, and nothing else: the ONE normalisation table.

Every row of :data:`NORMALISATIONS` names the fields it touches and why Kafka's own specification lets two correct
brokers answer them differently. An answer field not named here is compared exactly as it came over the wire; a
difference a row does not explain is either a defect of one target or a deliberate gap (``reference_broker/
GAPS.md``, mapped to fields in ``conformance.diff.compare.GAP_FIELDS``), never silently equal.

How the rows work: identifiers a broker assigns (node ids, topic ids, member ids, producer ids) are not erased but
*renamed consistently* per target and conversation (the first node id a target names becomes ``node#1``, and so
on), so "the leader is the node that answered FindCoordinator" or "the member the leader was told of is the one
that joined" are still compared. Member ids get the name of the exchange whose JoinGroup answer first carried them
(``member@12``), which is the same on both targets whatever order their answers arrived in.
"""
from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .codec import entity_fields, map_keys

ZERO_UUID = uuid.UUID(int=0)
MEMBER_FIELDS = frozenset({"member_id", "leader"})
# byte fields of the group APIs that carry member ids chosen by the broker (the suites' assignments name members)
MEMBER_BYTES = frozenset({"assignment", "metadata", "member_assignment", "member_metadata"})
GROUP_APIS = frozenset({11, 12, 13, 14, 15, 8})
JOIN_GROUP, DESCRIBE_GROUPS, METADATA, FIND_COORDINATOR, PRODUCE, OFFSET_FETCH = 11, 15, 3, 10, 0, 9
CREATE_TOPICS, DESCRIBE_CONFIGS, OFFSET_COMMIT, LIST_OFFSETS = 19, 32, 8, 2
DESCRIBE_QUORUM, DESCRIBE_CLUSTER, DESCRIBE_TOPIC_PARTITIONS = 55, 60, 75
# the fields of a DescribeQuorum ReplicaState (current_voters[] and observers[]) that the quorum-* rows touch
QUORUM_OFFSETS = frozenset({"high_watermark", "log_end_offset"})
QUORUM_CLOCK = frozenset({"last_fetch_timestamp", "last_caught_up_timestamp"})


@dataclass(frozen=True)
class Normalisation:
    """One row of the table: its name, the fields it applies to, and why a correct broker may differ there."""

    name: str
    fields: str
    why: str


NORMALISATIONS: tuple[Normalisation, ...] = (
    Normalisation(
        "throttle", "throttle_time_ms of every answer → 0",
        "Quota throttling depends on the client quotas configured and the load of the moment (KIP-13, KIP-219: "
        "ClientQuotaManager decides the delay); the reference broker has no quotas (GAPS.md 'Quotas')."),
    Normalisation(
        "cluster-id", "Metadata cluster_id → '<cluster id>' (null stays null)",
        "A random id chosen when the cluster's storage is formatted (kafka-storage format -t, KIP-631)."),
    Normalisation(
        "topic-ids", "every topic_id (UUID) → 'topic#k', renamed per target in first-seen order; the zero UUID "
        "stays", "Topic ids are random UUIDs the controller assigns at creation (KIP-516, "
        "ReplicationControlManager.createTopic: Uuid.randomUuid())."),
    Normalisation(
        "node-ids", "every answer field with entityType brokerId (node_id, leader_id, controller_id, replica_nodes, "
        "isr_nodes, offline_replicas, ...) ≥ 0 → 'node#k' per target in first-seen order; -1 stays",
        "node.id is deployment configuration (KRaft server.properties); only the relations between ids are "
        "Kafka's rules, and consistent renaming keeps them."),
    Normalisation(
        "addresses", "host and port of Metadata brokers[], FindCoordinator (also coordinators[]), DescribeCluster "
        "brokers[] and DescribeQuorum nodes[].listeners[] → '<host>', '<port>'", "Advertised listeners are "
        "deployment configuration (advertised.listeners, controller.quorum.voters); which node is named is still "
        "compared through the node id."),
    Normalisation(
        "quorum-offsets", "DescribeQuorum high_watermark and every replica's log_end_offset ≥ 0 → '<metadata "
        "offset>'; -1 (unknown) stays",
        "Offsets in __cluster_metadata count the records each controller implementation writes (registrations, "
        "feature levels, configs, and Kafka's NoOpRecord every metadata.max.idle.interval.ms, KIP-835), so they "
        "grow with time and differ between two correct controllers; whether an offset is known is compared, and "
        "the quorum suite checks log end ≥ high watermark (QUORUM-DESCRIBE)."),
    Normalisation(
        "quorum-clock", "DescribeQuorum last_fetch_timestamp and last_caught_up_timestamp ≥ 0 → '<controller clock>'; "
        "-1 stays", "The leader's wall clock when a replica fetched (KIP-836, LeaderState.ReplicaState); two "
        "controllers never read the same clock. Whether a time is known (-1 or not) is compared."),
    Normalisation(
        "quorum-epoch", "DescribeQuorum leader_epoch ≥ 1 → '<quorum epoch>'; 0 and -1 stay",
        "How many elections a fresh quorum held before it was asked depends on the order its controllers started "
        "in, the election timeout's random jitter and split votes (KIP-595, QuorumState; seen: the reference at "
        "epoch 1, Kafka 4.4.0 at epoch 2 after the same start). That an epoch is ≥ 1 at rest and never goes back "
        "is checked by the quorum suite (QUORUM-DESCRIBE, QUORUM-FAILOVER-PAUSE)."),
    Normalisation(
        "random-controller-id", "Metadata controller_id and DescribeCluster controller_id (endpoint type brokers) "
        "≥ 0 → '<a live broker>' when the answer lists more than one broker; with one broker it is compared",
        "A KRaft broker does not tell clients the active controller: it names a random live broker "
        "(KafkaApis.handleTopicMetadataRequest / handleDescribeCluster: KRaftCachedControllerId → "
        "metadataCache.getRandomAliveBrokerId), so two correct clusters of several brokers name different ones."),
    Normalisation(
        "replica-placement", "Metadata and DescribeTopicPartitions partitions[]: leader_id, replica_nodes, isr_nodes, "
        "offline_replicas, eligible_leader_replicas and last_known_elr name a replica by its position in "
        "replica_nodes ('replica[0]', ...) instead of its node; an id not among the replicas is kept (and renamed)",
        "Which brokers a new partition's replicas go to is the controller's choice: Kafka's StripedReplicaPlacer "
        "starts at a random broker (seen: one partition of the same topic on the 1st broker of one cluster and the "
        "3rd of the other). What Kafka's rules fix is compared: the leader is a replica (usually the first), the "
        "ISR and ELR are replicas, no replica twice."),
    Normalisation(
        "directory-ids", "DescribeQuorum v2 replica_directory_id other than the zero UUID → '<directory id>'",
        "A random UUID written to meta.properties when a log dir is formatted (KIP-853 ReplicaKey); the zero UUID "
        "(no directory id known) is compared."),
    Normalisation(
        "member-ids", "member_id and leader of the group APIs, and member ids inside their assignment/metadata "
        "bytes → 'member@i' (the exchange whose JoinGroup answer first carried the id); ids never handed out in a "
        "JoinGroup answer → 'member?k' per target in first-seen order",
        "The coordinator makes member ids as clientId + '-' + a random UUID (GroupMetadataManager / "
        "ClassicGroup.generateMemberId, KIP-394), so no two brokers hand out the same ids."),
    Normalisation(
        "producer-ids", "answer fields with entityType producerId ≥ 0 → 'producer#k' per target in first-seen order",
        "Producer ids come from id blocks the controller allocates (KIP-730 AllocateProducerIds); which id a "
        "producer gets is not specified, only that it is unique (GAPS.md 'Producer ids')."),
    Normalisation(
        "error-message-text", "error_message (any API) that is not null → '<message>'; null stays null",
        "The schemas define error_message as 'the error message, or null if there was no error': the error code "
        "is the contract, the text is for people (Kafka's own texts change between releases). Whether a message "
        "is present is still compared."),
    Normalisation(
        "broker-clock", "Produce partition_responses[].log_append_time_ms other than -1 → '<broker clock>'",
        "With message.timestamp.type=LogAppendTime the broker stamps its own wall clock (LogValidator); two "
        "brokers never read the same clock. -1 (CreateTime) is compared."),
    Normalisation(
        "unordered-collections", "arrays the schema declares maps (mapKey: Metadata brokers[] and topics[], "
        "ApiVersions api_keys[], CreateTopics topics[], ...), JoinGroup members[], DescribeGroups "
        "groups[].members[], OffsetCommit/OffsetFetch/ListOffsets topics[]/partitions[], DescribeQuorum "
        "current_voters[]/observers[] (put in id order before node ids are renamed: PRESORTED) and "
        "config lists are compared element by element by their key, not by position",
        "A mapKey array is a map in Kafka's generated code (ImplicitLinkedHashMultiCollection); ClassicGroup keeps "
        "its members in a HashMap, so Kafka's own order is unspecified there; OffsetFetch answers (topics[] by "
        "name, partitions[] by index) come from the group's offsets, a TimelineHashMap (OffsetMetadataManager), "
        "when all are asked for; OffsetCommit answers the same way because KafkaApis answers unknown partitions "
        "itself and merges the coordinator's answer in after them (OffsetCommitResponse.Builder). ListOffsets "
        "answers in the order of a HashMap (ReplicaManager.fetchOffset: statusByPartition, grouped by topic; seen "
        "on 4.4.0: partitions 0, 1, 2 asked, 1, 0, 2 answered). Config lists (CreateTopics "
        "topics[].configs[], DescribeConfigs results[].configs[]) are compared by name so that a config one side does not "
        "have is one difference, not a shift of every later entry (their sorted order is pinned by "
        "tests/broker/test_kafka_answer_shapes.py). Kafka's LeaderState keeps a quorum's voters and observers in "
        "HashMaps (describeQuorum lists them in that order), so their order is unspecified too."),
    Normalisation(
        "coordinator-readiness", "no field: before the first conversation each target is asked FindCoordinator and "
        "OffsetFetch for a warm-up group until its coordinator answers without an error (nothing compared)",
        "Kafka creates __consumer_offsets on the first FindCoordinator (COORDINATOR_NOT_AVAILABLE meanwhile) and "
        "answers NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS until the partition is loaded; clients retry. "
        "Only the first group request of a fresh cluster sees it."),
    Normalisation(
        "topic-readiness", "no field: after a CreateTopics answer that created topics, the replay waits (asking "
        "nothing it compares) until every new partition answers ListOffsets on its leader without an error",
        "Kafka answers CreateTopics once the controller committed the topic; the leader serves it a few ms later "
        "(the broker applies the metadata delta; NOT_LEADER_OR_FOLLOWER meanwhile, which clients retry). The "
        "reference answers once brokers applied it (GAPS.md 'CreateTopics / DeleteTopics / ElectLeaders answer')."),
    Normalisation(
        "re-asked-observations", "answers of requests that change nothing (Metadata, DescribeGroups, ListOffsets, "
        "OffsetFetch, FindCoordinator, DescribeConfigs, OffsetForLeaderEpoch, ListGroups) that differ are asked "
        "again on both targets, up to 2 s, and the answers compared are the first pair that agrees or the last",
        "Two brokers finish the same work (a leader election, a join phase) a few milliseconds apart; a poll at "
        "one instant may catch one before and the other after. A difference that stays 2 s is compared."),
)
ROW = {n.name: n for n in NORMALISATIONS}

# Requests that change no state, so asking again is harmless (the re-asked-observations row).
OBSERVATIONS = frozenset({2, 3, 9, 10, 15, 16, 23, 32, DESCRIBE_QUORUM, DESCRIBE_CLUSTER, DESCRIBE_TOPIC_PARTITIONS})


@dataclass
class SideNames:
    """One target's consistent renamings within one conversation (see the module docstring)."""

    nodes: dict[int, str] = field(default_factory=dict)
    topic_ids: dict[Any, str] = field(default_factory=dict)
    producers: dict[int, str] = field(default_factory=dict)
    members: dict[str, str] = field(default_factory=dict)     # actual id → 'member@i' (JoinGroup answers)
    strays: dict[str, str] = field(default_factory=dict)      # actual id → 'member?k' (never handed out)

    def bind_members(self, index: int, api_key: int, tree: dict[str, Any] | None) -> None:
        """Learn the member id a JoinGroup answer (exchange ``index``) hands out."""
        if api_key == JOIN_GROUP and tree:
            mid = tree.get("member_id")
            if mid and mid not in self.members:
                self.members[mid] = f"member@{index}"

    def member(self, value: str) -> str:
        if not value:
            return value
        if value in self.members:
            return self.members[value]
        return self.strays.setdefault(value, f"member?{len(self.strays) + 1}")

    def member_bytes(self, data: bytes) -> bytes:
        for mid, sym in sorted(self.members.items(), key=lambda kv: -len(kv[0])):
            data = data.replace(mid.encode(), f"<{sym}>".encode())
        return data

    def rename(self, table: dict[Any, str], prefix: str, value: Any) -> str:
        return table.setdefault(value, f"{prefix}#{len(table) + 1}")


_ENTITIES: dict[int, dict[str, str]] = {}


def _entities(api_key: int) -> dict[str, str]:
    if api_key not in _ENTITIES:
        try:
            _ENTITIES[api_key] = entity_fields(api_key, request=False)
        except KeyError:
            _ENTITIES[api_key] = {}
    return _ENTITIES[api_key]


def normalise(api_key: int, tree: dict[str, Any], names: SideNames) -> dict[str, Any]:
    """The answer ``tree`` with every row of :data:`NORMALISATIONS` applied (a new tree; the input is kept)."""
    ents = _entities(api_key)
    out = _walk(api_key, _placement(api_key, _random_controller(api_key, _presort(api_key, tree))), "", ents, names)
    return _order(api_key, out)


def _walk(api_key: int, value: Any, path: str, ents: dict[str, str], names: SideNames) -> Any:
    if isinstance(value, dict):
        return {k: _walk(api_key, v, f"{path}.{k}" if path else k, ents, names) for k, v in value.items()}
    if isinstance(value, list):
        if path in ents:      # an array of ids (replica_nodes, isr_nodes, ...)
            return [_leaf(api_key, path, x, ents, names) for x in value]
        return [_walk(api_key, v, path + "[]", ents, names) for v in value]
    return _leaf(api_key, path, value, ents, names)


def _leaf(api_key: int, path: str, value: Any, ents: dict[str, str], names: SideNames) -> Any:
    name = path.rsplit(".", 1)[-1]
    entity = ents.get(path)
    for rule in _LEAF_RULES:
        hit, value2 = rule(api_key, path, name, entity, value, names)
        if hit:
            return value2
    return value


LeafRule = Callable[[int, str, str, "str | None", Any, SideNames], "tuple[bool, Any]"]


def _throttle(api_key: int, path: str, name: str, entity: str | None, value: Any, names: SideNames) -> tuple[bool, Any]:
    return (True, 0) if path == "throttle_time_ms" else (False, value)


def _cluster_id(api_key: int, path: str, name: str, entity: str | None, value: Any,
                names: SideNames) -> tuple[bool, Any]:
    if path == "cluster_id" and value is not None:
        return True, "<cluster id>"
    return False, value


def _topic_ids(api_key: int, path: str, name: str, entity: str | None, value: Any,
               names: SideNames) -> tuple[bool, Any]:
    if name == "topic_id" and isinstance(value, uuid.UUID):
        return True, (str(value) if value == ZERO_UUID else names.rename(names.topic_ids, "topic", value))
    return False, value


def _node_ids(api_key: int, path: str, name: str, entity: str | None, value: Any,
              names: SideNames) -> tuple[bool, Any]:
    if entity == "brokerId" and isinstance(value, int) and value >= 0:
        return True, names.rename(names.nodes, "node", value)
    return False, value


def _addresses(api_key: int, path: str, name: str, entity: str | None, value: Any,
               names: SideNames) -> tuple[bool, Any]:
    if api_key in (METADATA, FIND_COORDINATOR, DESCRIBE_CLUSTER, DESCRIBE_QUORUM) and name in ("host", "port") \
            and value not in (None, "", -1):
        return True, f"<{name}>"
    return False, value


def _member_ids(api_key: int, path: str, name: str, entity: str | None, value: Any,
                names: SideNames) -> tuple[bool, Any]:
    if api_key not in GROUP_APIS:
        return False, value
    if name in MEMBER_FIELDS and isinstance(value, str):
        return True, names.member(value)
    if name in MEMBER_BYTES and isinstance(value, bytes):
        return True, names.member_bytes(value)
    return False, value


def _producer_ids(api_key: int, path: str, name: str, entity: str | None, value: Any,
                  names: SideNames) -> tuple[bool, Any]:
    if entity == "producerId" and isinstance(value, int) and value >= 0:
        return True, names.rename(names.producers, "producer", value)
    return False, value


def _error_message(api_key: int, path: str, name: str, entity: str | None, value: Any,
                   names: SideNames) -> tuple[bool, Any]:
    if name == "error_message" and value is not None:
        return True, "<message>"
    return False, value


def _broker_clock(api_key: int, path: str, name: str, entity: str | None, value: Any,
                  names: SideNames) -> tuple[bool, Any]:
    if api_key == PRODUCE and name == "log_append_time_ms" and value != -1:
        return True, "<broker clock>"
    return False, value


def _quorum_offsets(api_key: int, path: str, name: str, entity: str | None, value: Any,
                    names: SideNames) -> tuple[bool, Any]:
    if api_key == DESCRIBE_QUORUM and name in QUORUM_OFFSETS and isinstance(value, int) and value >= 0:
        return True, "<metadata offset>"
    return False, value


def _quorum_clock(api_key: int, path: str, name: str, entity: str | None, value: Any,
                  names: SideNames) -> tuple[bool, Any]:
    if api_key == DESCRIBE_QUORUM and name in QUORUM_CLOCK and isinstance(value, int) and value >= 0:
        return True, "<controller clock>"
    return False, value


def _quorum_epoch(api_key: int, path: str, name: str, entity: str | None, value: Any,
                  names: SideNames) -> tuple[bool, Any]:
    if api_key == DESCRIBE_QUORUM and path == "topics[].partitions[].leader_epoch" and isinstance(value, int) \
            and value >= 1:
        return True, "<quorum epoch>"
    return False, value


def _directory_ids(api_key: int, path: str, name: str, entity: str | None, value: Any,
                   names: SideNames) -> tuple[bool, Any]:
    if api_key == DESCRIBE_QUORUM and name == "replica_directory_id" and isinstance(value, uuid.UUID) \
            and value != ZERO_UUID:
        return True, "<directory id>"
    return False, value


# in the table's order; each leaf takes the first rule that applies
_LEAF_RULES: tuple[LeafRule, ...] = (_throttle, _cluster_id, _topic_ids, _node_ids, _addresses, _quorum_offsets,
                                     _quorum_clock, _quorum_epoch, _directory_ids, _member_ids, _producer_ids, _error_message,
                                     _broker_clock)
# the row each leaf rule implements (tests check the two lists stay one table)
RULE_ROWS = {_throttle: "throttle", _cluster_id: "cluster-id", _topic_ids: "topic-ids", _node_ids: "node-ids",
             _addresses: "addresses", _quorum_offsets: "quorum-offsets", _quorum_clock: "quorum-clock",
             _quorum_epoch: "quorum-epoch",
             _directory_ids: "directory-ids", _member_ids: "member-ids", _producer_ids: "producer-ids",
             _error_message: "error-message-text", _broker_clock: "broker-clock"}


class KeyedList(list):
    """An array compared by the key of its elements, not their position (the unordered-collections row)."""

    def __init__(self, items: Any, key: str) -> None:
        super().__init__(items)
        self.key = key


# unordered-collections beyond the schema's own maps: (api key, path of the array, the field its elements are
# known by)
UNORDERED: tuple[tuple[int, str, str], ...] = (
    (JOIN_GROUP, "members", "member_id"),
    (DESCRIBE_GROUPS, "groups[].members", "member_id"),
    (OFFSET_COMMIT, "topics", "name"),
    (OFFSET_COMMIT, "topics[].partitions", "partition_index"),
    (OFFSET_FETCH, "topics", "name"),
    (CREATE_TOPICS, "topics[].configs", "name"),
    (DESCRIBE_CONFIGS, "results[].configs", "name"),
    (OFFSET_FETCH, "topics[].partitions", "partition_index"),
    (LIST_OFFSETS, "topics", "name"),
    (LIST_OFFSETS, "topics[].partitions", "partition_index"),
    (DESCRIBE_QUORUM, "topics[].partitions[].current_voters", "replica_id"),
    (DESCRIBE_QUORUM, "topics[].partitions[].observers", "replica_id"),
)
_KEYED: dict[int, dict[str, str]] = {}
# arrays of node ids in an unspecified order (Kafka's LeaderState keeps voters and observers in HashMaps) that are
# put in id order BEFORE the node-ids row renames them, so that both targets name the same nodes in the same order
PRESORTED: dict[int, dict[str, str]] = {
    DESCRIBE_QUORUM: {"topics[].partitions[].current_voters": "replica_id",
                      "topics[].partitions[].observers": "replica_id", "nodes": "node_id"},
    DESCRIBE_CLUSTER: {"brokers": "broker_id"},
}


def _random_controller(api_key: int, tree: dict[str, Any]) -> dict[str, Any]:
    """The random-controller-id row (a whole-answer rule: it needs the number of brokers and the endpoint type)."""
    if api_key not in (METADATA, DESCRIBE_CLUSTER) or not isinstance(tree.get("controller_id"), int):
        return tree
    if tree["controller_id"] < 0 or len(tree.get("brokers") or []) < 2 or tree.get("endpoint_type", 1) != 1:
        return tree
    return {**tree, "controller_id": "<a live broker>"}


PLACED = ("isr_nodes", "offline_replicas", "eligible_leader_replicas", "last_known_elr")


def _placement(api_key: int, tree: dict[str, Any]) -> dict[str, Any]:
    """The replica-placement row (a whole-partition rule: positions are relative to the partition's replica_nodes)."""
    if api_key not in (METADATA, DESCRIBE_TOPIC_PARTITIONS) or not isinstance(tree.get("topics"), list):
        return tree

    def part(p: Any) -> Any:
        if not isinstance(p, dict) or not isinstance(p.get("replica_nodes"), list):
            return p
        pos: dict[int, str] = {}
        for i, r in enumerate(p["replica_nodes"]):
            pos.setdefault(r, f"replica[{i}]")
        out = {**p, "replica_nodes": [pos[r] for r in p["replica_nodes"]]}
        if isinstance(p.get("leader_id"), int) and p["leader_id"] in pos:
            out["leader_id"] = pos[p["leader_id"]]
        for name in PLACED:
            if isinstance(p.get(name), list):
                out[name] = [pos.get(r, r) for r in p[name]]
        return out

    topics = [{**t, "partitions": [part(p) for p in t["partitions"]]}
              if isinstance(t, dict) and isinstance(t.get("partitions"), list) else t for t in tree["topics"]]
    return {**tree, "topics": topics}


def _presort(api_key: int, tree: dict[str, Any]) -> dict[str, Any]:
    arrays = PRESORTED.get(api_key)
    if not arrays:
        return tree

    def walk(value: Any, path: str) -> Any:
        if isinstance(value, dict):
            return {k: walk(v, f"{path}.{k}" if path else k) for k, v in value.items()}
        if isinstance(value, list):
            items = [walk(v, path + "[]") for v in value]
            key = arrays.get(path)
            if key is not None and all(isinstance(v, dict) and isinstance(v.get(key), int) for v in items):
                items.sort(key=lambda v: v[key])
            return items
        return value

    return walk(tree, "")


def keyed_arrays(api_key: int) -> dict[str, str]:
    """{array path: key field}: the schema's mapKey arrays and :data:`UNORDERED`."""
    if api_key not in _KEYED:
        try:
            found = map_keys(api_key, request=False)
        except KeyError:
            found = {}
        found.update({path: key for k, path, key in UNORDERED if k == api_key})
        _KEYED[api_key] = found
    return _KEYED[api_key]


def _order(api_key: int, tree: dict[str, Any]) -> dict[str, Any]:
    keyed = keyed_arrays(api_key)
    return _key_arrays(tree, "", keyed) if keyed else tree


def _key_arrays(value: Any, path: str, keyed: dict[str, str]) -> Any:
    if isinstance(value, dict):
        return {k: _key_arrays(v, f"{path}.{k}" if path else k, keyed) for k, v in value.items()}
    if isinstance(value, list):
        items = [_key_arrays(v, path + "[]", keyed) for v in value]
        key = keyed.get(path)
        if key is not None and all(isinstance(v, dict) and key in v for v in items):
            return KeyedList(sorted(items, key=lambda v: repr(v[key])), key)
        return items
    return value
