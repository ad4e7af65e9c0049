"""The controller's partition changes with eligible leader replicas (KIP-966), in process: the cases of Kafka 4.4.0's
PartitionChangeBuilder / ReplicationControlManager the ELR conformance rules rely on, run through the same
QuorumController methods the cluster uses (registration, heartbeats that fence and unfence, AlterPartition)."""
from __future__ import annotations

import random

from reference_broker.clock import ManualClock
from reference_broker.config import BrokerConfig
from reference_broker.controller.quorum_controller import QuorumController
from reference_broker.faults import Faults
from reference_broker.log.memory import MemoryLog
from reference_broker.metadata.image import PartitionState

TOPIC = "elr"


def controller(elr_level: int = 1, faults: tuple[str, ...] = ()) -> QuorumController:
    cfg = BrokerConfig({"eligible.leader.replicas.version": elr_level})
    c = QuorumController(cfg, MemoryLog(), ManualClock(), random.Random(7), Faults(faults))
    c.bootstrap_features()
    for b in (0, 1, 2):
        start(c, b, f"inc-{b}")
    err, _ = c.create_topic(TOPIC, 1, 3, {"min.insync.replicas": "2"})
    assert err == 0
    return c


def start(c: QuorumController, b: int, incarnation: str, previous_epoch: int = -1) -> None:
    """Register (a new incarnation; ``previous_epoch`` is what a clean shutdown left behind) and unfence."""
    err, epoch = c.register_broker(b, c.config["cluster.id"], incarnation, "h", 1, "h", 2, None, previous_epoch)
    assert err == 0
    assert not c.heartbeat(b, epoch, c.end_offset, False, False).error
    assert not c.image.brokers[b].fenced


def fence(c: QuorumController, b: int) -> None:
    """The broker's heartbeats stop: its session expires (the others' sessions are still live)."""
    c.session_deadline[b] = c.clock.monotonic() - 1
    assert c.expire_sessions() == [b]
    assert c.image.brokers[b].fenced


def part(c: QuorumController) -> PartitionState:
    st = c.image.partition(TOPIC, 0)
    assert st is not None
    return st


def others(st: PartitionState) -> list[int]:
    return [r for r in st.replicas if r != st.leader]


def test_features_are_finalized_in_the_metadata_log() -> None:
    c = controller()
    assert c.image.feature("eligible.leader.replicas.version") == 1
    assert c.image.feature("transaction.version") == 2
    before = c.end_offset
    c.bootstrap_features()                       # formatted once
    assert c.end_offset == before


def test_replica_leaving_below_min_isr_joins_the_elr_and_leaves_it_at_min_isr() -> None:
    c = controller()
    leader = part(c).leader
    a, b = others(part(c))
    fence(c, a)                                  # ISR 2 = min ISR: no ELR
    assert sorted(part(c).isr) == sorted([leader, b]) and part(c).elr == []
    fence(c, b)                                  # ISR 1 < 2: b is kept as eligible
    st = part(c)
    assert st.isr == [leader] and st.elr == [b] and st.last_known_elr == []
    # b comes back and the leader adds it to the ISR: at min ISR again, the ELR is cleared
    start(c, b, "inc-b2")
    st = part(c)
    assert b not in st.elr, "a new incarnation (unclean shutdown) leaves the ELR"
    err, _ = c.alter_partition(leader, c.image.brokers[leader].epoch, st.topic_id, 0, st.leader_epoch,
                               st.partition_epoch, sorted([leader, b]))
    assert err == 0 and part(c).elr == []


def test_last_isr_member_fenced_leaves_an_empty_isr_and_a_clean_election_from_the_elr() -> None:
    c = controller()
    leader = part(c).leader
    a, b = others(part(c))
    fence(c, a)
    fence(c, b)
    fence(c, leader)
    st = part(c)
    assert st.leader == -1 and st.isr == [] and st.elr == sorted([b, leader]) and st.last_known_elr == [leader]
    # b unfenced by heartbeat (same incarnation: no unclean shutdown) is elected from the ELR, cleanly
    c.session_deadline[b] = c.clock.monotonic() + 60
    assert c.heartbeat(b, c.image.brokers[b].epoch, c.end_offset, False, False).error == 0
    st = part(c)
    assert st.leader == b and st.isr == [b] and st.elr == [leader] and st.last_known_elr == []


def test_last_leader_restarted_uncleanly_is_elected_as_the_last_known_leader() -> None:
    c = controller()
    leader = part(c).leader
    a, b = others(part(c))
    for x in (a, b, leader):
        fence(c, x)
    start(c, b, "inc-b2")                        # unclean: b leaves the ELR, is not elected
    assert part(c).leader == -1 and part(c).elr == [leader]
    start(c, leader, "inc-l2")                   # ELR empty, ISR empty: the last known leader is elected
    st = part(c)
    assert st.leader == leader and st.isr == [leader] and st.elr == [] and st.last_known_elr == []


def test_without_elr_the_isr_keeps_its_last_member() -> None:
    for c in (controller(elr_level=0), controller(faults=("elr.disabled",))):
        leader = part(c).leader
        a, b = others(part(c))
        for x in (a, b, leader):
            fence(c, x)
        st = part(c)
        assert st.leader == -1 and st.isr == [leader] and st.elr == [] and st.last_known_elr == []


def test_cleanly_restarted_replica_keeps_its_elr_membership_and_is_elected_from_it() -> None:
    c = controller()
    leader = part(c).leader
    a, b = others(part(c))
    fence(c, a)
    fence(c, b)
    epoch = c.image.brokers[leader].epoch
    fence(c, leader)                             # stands for a clean shutdown: fenced, out of the ISR, in the ELR
    assert part(c).elr == sorted([b, leader])
    start(c, leader, "inc-l2", previous_epoch=epoch)
    st = part(c)
    assert st.leader == leader and st.isr == [leader] and st.elr == [b] and st.last_known_elr == []


def test_leader_shrinking_the_isr_below_min_isr_keeps_the_replica_eligible() -> None:
    """AlterPartition (the leader drops a lagging follower) goes through the same builder as fencing."""
    c = controller()
    st = part(c)
    a, b = others(st)
    epoch = c.image.brokers[st.leader].epoch
    err, _ = c.alter_partition(st.leader, epoch, st.topic_id, 0, st.leader_epoch, st.partition_epoch,
                               sorted([st.leader, b]))
    assert err == 0 and part(c).elr == []                        # 2 = min ISR
    st = part(c)
    err, _ = c.alter_partition(st.leader, epoch, st.topic_id, 0, st.leader_epoch, st.partition_epoch, [st.leader])
    st = part(c)
    assert err == 0 and st.isr == [st.leader] and st.elr == [b], st
    # turning ELR off (UpdateFeatures, safe downgrade) clears it, as Kafka's ClearElrRecord does
    assert c.update_features([("eligible.leader.replicas.version", 0, 2)], False) == (0, None)
    assert part(c).elr == [] and part(c).isr == [st.leader]
    assert a not in part(c).isr
