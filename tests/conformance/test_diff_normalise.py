"""The differential mode's normalisation table, comparison and conversation codec, without brokers."""
from __future__ import annotations

import uuid
from pathlib import Path

from kafka.protocol.consumer import OffsetCommitRequest
from kafka.protocol.producer import ProduceRequest

from conformance.diff import normalise as N
from conformance.diff.codec import build_request, decode_record_batches, from_json, request_tree, to_json
from conformance.diff.compare import ABSENT, GAP_FIELDS, Tally, differences, flatten, known_gap
from conformance.diff.conversation import Recorder, fresh_name
from conformance.wire import keyed_batch, record_batch

ROOT = Path(__file__).resolve().parents[2]
METADATA, JOIN_GROUP, DESCRIBE_GROUPS, FETCH, PRODUCE, FIND_COORDINATOR, LIST_OFFSETS = 3, 11, 15, 1, 0, 10, 2


# ------------------------------------------------------------------------------------------------ the table
def test_one_table_every_rule_a_row() -> None:
    names = [n.name for n in N.NORMALISATIONS]
    assert len(names) == len(set(names)), "row names are unique"
    assert all(n.fields and len(n.why) > 40 for n in N.NORMALISATIONS), "every row says which fields and why"
    assert set(N.RULE_ROWS.values()) <= set(names), "every leaf rule implements a row of the one table"
    assert set(N.RULE_ROWS) == set(N._LEAF_RULES), "no leaf rule outside the table"


def test_fields_outside_the_table_are_compared_as_sent() -> None:
    tree = {"throttle_time_ms": 5, "responses": [{"topic": "t", "partitions": [
        {"partition_index": 0, "error_code": 1, "high_watermark": 7, "log_start_offset": 2, "records": None}]}]}
    out = N.normalise(FETCH, tree, N.SideNames())
    assert out["throttle_time_ms"] == 0
    assert out["responses"] == tree["responses"], "only throttle_time_ms may change in this answer"


def test_metadata_ids_and_addresses_renamed_consistently() -> None:
    zero = uuid.UUID(int=0)
    tid = uuid.uuid4()
    tree = {"throttle_time_ms": 0, "cluster_id": "abc", "controller_id": 7,
            "brokers": [{"node_id": 9, "host": "10.0.0.9", "port": 9092, "rack": None},
                        {"node_id": 7, "host": "10.0.0.7", "port": 9093, "rack": None}],
            "topics": [{"error_code": 0, "name": "t", "topic_id": tid, "is_internal": False, "partitions": [
                {"error_code": 0, "partition_index": 0, "leader_id": 7, "leader_epoch": 0, "replica_nodes": [7, 9],
                 "isr_nodes": [7], "offline_replicas": []}]},
                       {"error_code": 3, "name": "u", "topic_id": zero, "is_internal": False, "partitions": []}]}
    names = N.SideNames()
    out = N.normalise(METADATA, tree, names)
    assert out["cluster_id"] == "<cluster id>"
    # two brokers: a KRaft broker names a random live one as controller (the random-controller-id row)
    assert out["controller_id"] == "<a live broker>"
    # replicas by their position in replica_nodes (the replica-placement row): the leader is the first replica
    assert out["topics"][0]["partitions"][0]["leader_id"] == "replica[0]"
    assert out["topics"][0]["partitions"][0]["replica_nodes"] == ["replica[0]", "replica[1]"]
    assert out["topics"][0]["partitions"][0]["isr_nodes"] == ["replica[0]"]
    assert {b["node_id"]: (b["host"], b["port"]) for b in out["brokers"]} == {
        "node#1": ("<host>", "<port>"), "node#2": ("<host>", "<port>")}
    assert out["topics"][0]["topic_id"] == "topic#1" and out["topics"][1]["topic_id"] == str(zero)
    # the same ids in another answer of the same conversation get the same names
    again = N.normalise(METADATA, {"controller_id": 9, "brokers": [], "topics": []}, names)
    assert again["controller_id"] == "node#1"
    # a node id of -1 (no leader) is kept
    assert N.normalise(METADATA, {"controller_id": -1}, N.SideNames())["controller_id"] == -1


def test_member_ids_named_by_the_exchange_that_handed_them_out() -> None:
    names = N.SideNames()
    names.bind_members(4, JOIN_GROUP, {"member_id": "c-1f2e"})
    names.bind_members(6, JOIN_GROUP, {"member_id": "c-99aa"})
    join = {"error_code": 0, "leader": "c-99aa", "member_id": "c-1f2e",
            "members": [{"member_id": "c-99aa", "metadata": b"m"}, {"member_id": "c-1f2e", "metadata": b"m"}]}
    out = N.normalise(JOIN_GROUP, join, names)
    assert (out["leader"], out["member_id"]) == ("member@6", "member@4")
    assert [m["member_id"] for m in out["members"]] == ["member@4", "member@6"], "members compared by key"
    described = {"groups": [{"members": [{"member_id": "c-1f2e", "member_assignment": b"A:c-1f2e",
                                          "client_host": "/127.0.0.1"}, {"member_id": "zz-unknown"}]}]}
    out = N.normalise(DESCRIBE_GROUPS, described, names)
    members = {m["member_id"]: m for m in out["groups"][0]["members"]}
    assert members["member@4"]["member_assignment"] == b"A:<member@4>", "ids inside assignments renamed too"
    assert "member?1" in members, "an id no JoinGroup handed out is named in first-seen order"
    assert members["member@4"]["client_host"] == "/127.0.0.1", "client_host is not in the table"


def test_error_messages_keep_their_nullness() -> None:
    out = N.normalise(FIND_COORDINATOR, {"error_code": 0, "error_message": "NONE", "host": "h", "port": 1,
                                         "node_id": 0}, N.SideNames())
    assert out["error_message"] == "<message>"
    assert N.normalise(FIND_COORDINATOR, {"error_message": None}, N.SideNames())["error_message"] is None
    assert N.normalise(FIND_COORDINATOR, {"error_message": ""}, N.SideNames())["error_message"] == "<message>"


def test_broker_clock_only_when_stamped() -> None:
    tree = {"responses": [{"name": "t", "partition_responses": [
        {"index": 0, "log_append_time_ms": -1}, {"index": 1, "log_append_time_ms": 1_700_000_000_123}]}]}
    parts = N.normalise(PRODUCE, tree, N.SideNames())["responses"][0]["partition_responses"]
    assert [p["log_append_time_ms"] for p in parts] == [-1, "<broker clock>"]


# ------------------------------------------------------------------------------------------------ comparison
def test_differences_by_field_and_known_gaps() -> None:
    a = {"error_code": 0, "items": [{"x": 1, "y": [1, 2]}]}
    b = {"error_code": 3, "items": [{"x": 1, "y": [1]}, {"x": 2, "y": []}]}
    diffs = {d.path: (d.a, d.b) for d in differences(FETCH, a, b)}
    assert diffs == {"error_code": (0, 3), "items[0].y": ([1, 2], [1]), "items[1].x": (ABSENT, 2),
                     "items[1].y": (ABSENT, [])}
    assert known_gap(FETCH, "responses[0].partitions[0].records[2].partial_bytes", ABSENT, 135) == \
        "Fetch size limits (KIP-74)"
    assert known_gap(FETCH, "responses[0].partitions[0].records[2].partial_bytes", 135, ABSENT) is None, \
        "a gap covers the reference's side of it only"
    assert known_gap(FETCH, "responses[0].partitions[0].high_watermark", 1, 2) is None


def test_every_gap_names_a_gaps_md_row() -> None:
    rows = {line.split("|")[1].strip() for line in (ROOT / "reference_broker" / "GAPS.md").read_text().splitlines()
            if line.startswith("| ") and not line.startswith("| area")}
    missing = {g.row for g in GAP_FIELDS} - rows
    assert not missing, f"GAP_FIELDS rows not in reference_broker/GAPS.md: {missing}"


def test_tally_counts_answers_fields_and_first_example() -> None:
    t = Tally()
    t.add({"conversation": "c1", "step": 0}, FETCH, 12, {"r": 1}, {"error_code": 0, "hw": 1}, {"error_code": 0,
                                                                                                 "hw": 1})
    t.add({"conversation": "c1", "step": 1}, FETCH, 12, {"r": 2}, {"error_code": 0, "hw": 2}, {"error_code": 0,
                                                                                                 "hw": 3})
    t.add({"conversation": "c2", "step": 5}, FETCH, 12, {"r": 3}, {"error_code": 0, "hw": 4}, {"error_code": 0,
                                                                                                 "hw": 5})
    doc = t.to_json()
    (api,) = doc["apis"]
    assert (api["api"], api["version"], api["answers"], api["answers_differing"]) == ("Fetch", 12, 3, 2)
    fields = {f["field"]: f for f in api["fields"]}
    assert (fields["hw"]["answers"], fields["hw"]["differ"], fields["error_code"]["differ"]) == (3, 2, 0)
    first = fields["hw"]["first"]
    assert (first["conversation"], first["step"], first["a"], first["b"], first["request"]) == ("c1", 1, 2, 3,
                                                                                                {"r": 2})
    assert doc["summary"]["fields_unexplained"] == 1 and t.unexplained == 1


def test_keyed_arrays_flatten_by_key() -> None:
    out = N.normalise(METADATA, {"brokers": [{"node_id": 2, "host": "h"}, {"node_id": 1, "host": "h"}]},
                      N.SideNames())
    assert set(flatten(out)) == {"brokers[node_id=node#1].node_id", "brokers[node_id=node#1].host",
                                 "brokers[node_id=node#2].node_id", "brokers[node_id=node#2].host"}


def test_list_offsets_partitions_compared_by_index() -> None:
    """Kafka 4.4.0 answered partitions 0, 1, 2 of a ListOffsets as 1, 0, 2 (a HashMap in ReplicaManager.fetchOffset);
    the order is not a difference, an offset is. (Before: 4 differences, partition_index and offset at positions 0, 1.)"""
    def answer(order: list[int], offsets: dict[int, int]) -> dict:
        return {"throttle_time_ms": 0, "topics": [{"name": "t", "partitions": [
            {"partition_index": i, "error_code": 0, "timestamp": -1, "offset": offsets[i], "leader_epoch": 0}
            for i in order]}]}
    ref = N.normalise(LIST_OFFSETS, answer([0, 1, 2], {0: 0, 1: 5, 2: 0}), N.SideNames())
    kafka = N.normalise(LIST_OFFSETS, answer([1, 0, 2], {0: 0, 1: 5, 2: 0}), N.SideNames())
    assert differences(LIST_OFFSETS, ref, kafka) == []
    other = N.normalise(LIST_OFFSETS, answer([1, 0, 2], {0: 0, 1: 6, 2: 0}), N.SideNames())
    assert [(d.path, d.a, d.b) for d in differences(LIST_OFFSETS, ref, other)] == [
        ("topics[name=t].partitions[partition_index=1].offset", 5, 6)]


# ------------------------------------------------------------------------------------------------ conversations
def test_requests_round_trip_through_json() -> None:
    T = ProduceRequest.TopicProduceData
    req = ProduceRequest(transactional_id=None, acks=-1, timeout_ms=10, topic_data=[T(name="t", partition_data=[
        T.PartitionProduceData(index=0, records=record_batch([b"a", None]))])])
    again = build_request(0, from_json(to_json(request_tree(req))))
    assert again.encode(version=9) == req.encode(version=9)


def test_records_shown_by_batch_field() -> None:
    data = keyed_batch([b"v"], keys=[b"k"], headers=[[("h", b"x")]]) + record_batch([b"w"])
    batches = decode_record_batches(data + data[:20])
    assert [b.get("base_offset") for b in batches[:2]] == [0, 0] and batches[2] == {"partial_bytes": 20}
    assert batches[0]["records"] == [{"offset": 0, "timestamp": 1_700_000_000_000, "key": b"k", "value": b"v",
                                      "headers": [["h", b"x"]]}]


def test_fresh_names_keep_length_and_shape() -> None:
    assert fresh_name("kct-1a2b3c-17", "ffee") == "kct-ffeeff-17"
    assert fresh_name("__consumer_offsets", "ffee") == "__consumer_offsets"
    long = "x" * 240 + "abcdef123"
    assert len(fresh_name(long, "0123")) == len(long)


def test_member_ids_become_references_also_inside_bytes() -> None:
    class FakeWire:
        class conn:
            host, port, client_id = "127.0.0.1", 1, "c"
    rec = Recorder("conv", "127.0.0.1:1")
    wire = FakeWire()
    rec.opened(wire)  # type: ignore[arg-type]
    rec.members["c-1234abcd"] = "member@2"
    T = OffsetCommitRequest.OffsetCommitRequestTopic
    req = OffsetCommitRequest(group_id="kct-g-0a0b0c0d", generation_id_or_member_epoch=1, member_id="c-1234abcd",
                              group_instance_id=None, topics=[T(name="kct-aabbcc-1", partitions=[
                                  T.OffsetCommitRequestPartition(partition_index=0, committed_offset=1,
                                                                 committed_leader_epoch=-1,
                                                                 committed_metadata="for c-1234abcd")])])
    rec.sent(wire, 8, 8, req, 30.0)  # type: ignore[arg-type]
    conv = rec.finish("passed")
    step = conv.steps[0].request
    assert step["member_id"] == {"$s": [{"ref": "member@2"}]}
    assert step["topics"][0]["partitions"][0]["committed_metadata"] == {"$s": ["for ", {"ref": "member@2"}]}
    assert set(conv.names) == {"kct-g-0a0b0c0d", "kct-aabbcc-1"}, "topic and group names from the schema"


def test_gaps_are_the_reference_brokers_whichever_side_it_is() -> None:
    a = {"responses": [{"partitions": [{"records": [{"base_offset": 0}]}]}]}
    b = {"responses": [{"partitions": [{"records": [{"base_offset": 0}, {"partial_bytes": 9}]}]}]}
    (d,) = differences(FETCH, a, b, "a")
    assert d.gap == "Fetch size limits (KIP-74)", "the reference (a) sends whole batches: known"
    (d,) = differences(FETCH, b, a, "b")
    assert d.gap == "Fetch size limits (KIP-74)", "the same with the reference as target b"
    (d,) = differences(FETCH, a, b, None)
    assert d.gap is None, "between two other brokers the reference's gaps explain nothing"


def test_describe_quorum_rows_and_voter_order() -> None:
    """DescribeQuorum (issue 25): metadata offsets, the controller's clock, directory ids and addresses are
    normalised; voters listed in another order (Kafka's LeaderState HashMap) are named in id order, so two answers
    that differ only in order and in those fields compare equal, while leader, epoch and -1s are still compared."""
    zero, dir_a, dir_b = uuid.UUID(int=0), uuid.uuid4(), uuid.uuid4()

    def answer(voters: list[int], hw: int, t: int, directory: uuid.UUID, port: int) -> dict:
        rs = [{"replica_id": v, "replica_directory_id": zero, "log_end_offset": hw + v % 3,
               "last_fetch_timestamp": -1 if v == 1000 else t + v, "last_caught_up_timestamp": t} for v in voters]
        return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "topics": [{
            "topic_name": "__cluster_metadata", "partitions": [{
                "partition_index": 0, "error_code": 0, "error_message": None, "leader_id": 1000, "leader_epoch": 1,
                "high_watermark": hw, "current_voters": rs,
                "observers": [{"replica_id": 0, "replica_directory_id": directory, "log_end_offset": -1,
                               "last_fetch_timestamp": t, "last_caught_up_timestamp": t}]}]}],
            "nodes": [{"node_id": v, "listeners": [{"name": "CONTROLLER", "host": "127.0.0.1", "port": port + v}]}
                      for v in voters]}

    a = N.normalise(55, answer([1000, 1001, 1002], 40, 1_700_000_000_000, dir_a, 9000), N.SideNames())
    b = N.normalise(55, answer([1002, 1000, 1001], 97, 1_800_000_000_000, dir_b, 7000), N.SideNames())
    assert differences(55, a, b) == []
    p = a["topics"][0]["partitions"][0]
    assert p["leader_id"] == "node#1" and p["leader_epoch"] == "<quorum epoch>"
    assert p["high_watermark"] == "<metadata offset>"
    assert [v["replica_id"] for v in p["current_voters"]] == ["node#1", "node#2", "node#3"]
    assert p["current_voters"][0]["last_fetch_timestamp"] == -1, "an unknown time (-1) is compared"
    assert p["observers"][0]["log_end_offset"] == -1 and p["observers"][0]["replica_directory_id"] == "<directory id>"
    c = N.normalise(55, answer([1000, 1001, 1002], 40, 1, zero, 9000), N.SideNames())
    diffs = {d.field for d in differences(55, a, c)}
    assert diffs == {"topics[].partitions[].observers[].replica_directory_id"}, diffs


def test_describe_cluster_addresses_and_ids() -> None:
    tree = {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "endpoint_type": 1,
            "cluster_id": "xyz", "controller_id": 2, "cluster_authorized_operations": -2147483648,
            "brokers": [{"broker_id": 2, "host": "h2", "port": 9, "rack": None},
                        {"broker_id": 0, "host": "h0", "port": 8, "rack": None}]}
    out = N.normalise(60, tree, N.SideNames())
    assert out["cluster_id"] == "<cluster id>" and out["controller_id"] == "<a live broker>"
    assert {(b["broker_id"], b["host"], b["port"]) for b in out["brokers"]} == {
        ("node#1", "<host>", "<port>"), ("node#2", "<host>", "<port>")}
    assert out["cluster_authorized_operations"] == -2147483648


def test_quorum_epoch_and_random_controller_rows() -> None:
    """A fresh quorum's epoch (1 on the reference, 2 on Kafka 4.4.0 in the same run) and the random live broker a
    KRaft broker names as controller of a cluster of several brokers are normalised; -1/0 and a single broker's
    answer are compared; the directory ids Kafka's observers carry are the GAPS.md row 'Dynamic quorum (KIP-853)'."""
    def dq(epoch: int) -> dict:
        return {"topics": [{"topic_name": "__cluster_metadata", "partitions": [
            {"partition_index": 0, "leader_id": 1000, "leader_epoch": epoch}]}]}

    def part(tree: dict) -> dict:
        return tree["topics"][0]["partitions"][0]

    assert part(N.normalise(55, dq(1), N.SideNames()))["leader_epoch"] == "<quorum epoch>"
    assert part(N.normalise(55, dq(-1), N.SideNames()))["leader_epoch"] == -1
    two = [{"node_id": 0, "host": "h", "port": 1, "rack": None}, {"node_id": 1, "host": "h", "port": 2, "rack": None}]
    assert N.normalise(METADATA, {"controller_id": 1, "brokers": two}, N.SideNames())["controller_id"] == \
        "<a live broker>"
    assert N.normalise(METADATA, {"controller_id": 0, "brokers": two[:1]}, N.SideNames())["controller_id"] == "node#1"
    assert N.normalise(60, {"endpoint_type": 2, "controller_id": 1000, "brokers": two}, N.SideNames())[
        "controller_id"] == "node#1", "from a controller listener it is the Raft leader: compared"
    path = "topics[0].partitions[0].observers[replica_id=node#4].replica_directory_id"
    assert known_gap(55, path, None, "<directory id>") == "Dynamic quorum (KIP-853)"
    assert known_gap(55, path, "<directory id>", None) is None


def test_replica_placement_compares_roles_not_brokers() -> None:
    """Kafka's StripedReplicaPlacer starts at a random broker: the same partition on different brokers of two
    clusters compares equal when its leader, ISR and ELR stand in the same relation to its replicas, and differs when
    they do not (a leader outside the replicas, an ISR short of a replica)."""
    def dtp(replicas: list[int], leader: int, isr: list[int]) -> dict:
        return {"topics": [{"error_code": 0, "name": "t", "partitions": [
            {"partition_index": 0, "leader_id": leader, "replica_nodes": replicas, "isr_nodes": isr,
             "eligible_leader_replicas": [], "last_known_elr": [], "offline_replicas": []}]}]}

    a = N.normalise(75, dtp([2, 0, 1], 2, [2, 0, 1]), N.SideNames())
    assert differences(75, a, N.normalise(75, dtp([0, 1, 2], 0, [0, 1, 2]), N.SideNames())) == []
    short = {d.field for d in differences(75, a, N.normalise(75, dtp([0, 1, 2], 0, [0, 1]), N.SideNames()))}
    assert short == {"topics[].partitions[].isr_nodes"}
    outside = N.normalise(75, dtp([0, 1, 2], 7, [0, 1, 2]), N.SideNames())
    assert outside["topics"][0]["partitions"][0]["leader_id"] == "node#1", "a leader that is no replica: renamed"
    assert N.normalise(75, dtp([0], -1, []), N.SideNames())["topics"][0]["partitions"][0]["leader_id"] == -1
