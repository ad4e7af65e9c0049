"""The leader's ISR and HW bookkeeping (Kafka's Partition.maybeIncrementLeaderHW and Replica.resetReplicaState),
driven on a real leader Partition and log in this process, the follower fetches given as the leader sees them
(issue 18 item 8):

- the HW also waits for a caught-up follower outside the ISR that is about to join it
  (shouldWaitForReplicaToJoinIsr), so it never joins with records below the HW it lacks;
- at election, replicas outside the ISR count as never caught up (lastCaughtUpTimeMs 0), so they hold nothing
  back.
"""
from __future__ import annotations

import uuid

from reference_broker.log.memory import MemoryLog
from reference_broker.partition import Partition

from ._wire import batch

LEADER = 0


def leader(isr: list[int], now: list[float]) -> Partition:
    p = Partition("t", 0, uuid.uuid4(), MemoryLog(), node_id=LEADER, replicas=[0, 1, 2], leader_id=-2,
                  leader_epoch=-1, isr=isr, partition_epoch=-1, hw=0)
    p.now_ms = lambda: now[0]
    p.lag_ms = 10_000
    p.make_leader(1, isr, [0, 1, 2], 1, now[0])
    return p


def append(p: Partition, n: int, now: list[float]) -> None:
    from reference_broker.log import batch as B

    data = batch([b"v"] * n)
    assert p.append_as_leader(data, B.parse_header(data), int(now[0])).error == 0


def test_hw_waits_for_a_caught_up_follower_about_to_join() -> None:
    """Follower 2 is out of the ISR but caught up (it fetched at the leader's end); an ISR change is in flight, so
    it is not proposed yet. After an append that only follower 1 fetched, Kafka's HW stays at follower 2's end."""
    now = [1_000.0]
    p = leader([0, 1], now)
    append(p, 10, now)
    for r in (1, 2):
        p.update_follower_fetch(r, 10, now[0])
    assert p.hw == 10
    p.pending_isr = [0, 1]                              # another change in flight: 2 is not proposed meanwhile
    append(p, 2, now)
    now[0] += 100
    p.update_follower_fetch(1, 12, now[0])
    assert p.hw == 10, f"follower 2 (caught up at 10, about to join) holds the HW; it moved to {p.hw}"
    p.update_follower_fetch(2, 12, now[0])
    assert p.hw == 12


def test_replicas_outside_the_isr_hold_nothing_back_at_election() -> None:
    """Elected with ISR [0, 1]: follower 2, which never fetches, is not caught up (lastCaughtUpTimeMs 0), so once
    follower 1 has the records the HW moves; before the fix every replica counted as caught up at election and
    (with the wait for followers about to join) follower 2 would have held the HW for replica.lag.time.max.ms."""
    now = [50_000.0]
    p = leader([0, 1], now)
    append(p, 5, now)
    now[0] += 100
    p.update_follower_fetch(1, 5, now[0])
    assert p.hw == 5, f"only ISR member 1 counts; HW {p.hw}"
