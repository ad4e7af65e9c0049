"""Leader-aware nemeses and fixed schedules that need cluster metadata at fault time, which the seeded nemeses of
chaos/nemesis (planned with no target at hand) cannot know: "the followers of topic/0" and "its leader".

`lossy` is the schedule that makes unclean leader election lose acknowledged writes, deterministically:

  1. stall-followers: SIGSTOP every follower of the partition's leader. After replica.lag.time.max.ms the
     leader shrinks the ISR to itself; with min.insync.replicas=1 acks=all writes keep being acknowledged,
     held by the leader alone.
  2. kill-leader: SIGKILL that leader (while the followers are still stopped), so the acknowledged tail exists
     nowhere else.
  3. the followers resume (end of 1). After broker.session.timeout.ms the controller fences the dead leader;
     the ISR has no live member, and with unclean.leader.election.enable a stale follower becomes leader.
  4. the old leader restarts (end of 2) and truncates to the new leader's log: the tail is gone for good.

With min.insync.replicas=2 the same schedule loses nothing: step 1 makes acks=all sends fail with
NOT_ENOUGH_REPLICAS instead of being acknowledged.
"""

from __future__ import annotations

import random
from typing import Any

from .nemesis.base import Context, Fault, PlanInput
from .nemesis.schedule import Step


def partition_leader(bootstrap: str, topic: str, partition: int) -> tuple[int, list[int]]:
    """(leader id, replica ids) of one partition, from a fresh Metadata request."""
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap.split(","), request_timeout_ms=5000)
    try:
        (desc,) = admin.describe_topics([topic])
        # kafka-python's describe output uses the schema's field names (partition_index, leader_id, replica_nodes)
        def get(d: dict, *names: str) -> Any:
            return next(d[n] for n in names if n in d)

        p = next(p for p in get(desc, "partitions") if get(p, "partition_index", "partition") == partition)
        return int(get(p, "leader_id", "leader")), [int(r) for r in get(p, "replica_nodes", "replicas")]
    finally:
        admin.close()


# The leader each partition had when a leader-aware fault last looked: while followers are stopped, a Metadata
# request may hang on a stopped broker, so kill-leader uses what stall-followers saw.
LAST_LEADER: dict[tuple[str, int], int] = {}


class StallFollowersNemesis:
    """SIGSTOP the followers of a partition's current leader; SIGCONT at the end."""

    kind = "stall-followers"

    def plan(self, rng: random.Random, where: PlanInput) -> dict[str, Any]:
        return {"topic": "chaos-queue", "partition": 0}

    def bind(self, params: dict[str, Any], ctx: Context) -> Fault:
        stalled: list[int] = []
        live = dict(params)

        def start() -> None:
            leader, replicas = partition_leader(ctx.target.bootstrap, params["topic"], params["partition"])
            live["leader"] = leader
            LAST_LEADER[(params["topic"], params["partition"])] = leader
            for b in replicas:
                if b != leader:
                    ctx.target.pause_broker(b)
                    stalled.append(b)
            live["brokers"] = list(stalled)

        def stop() -> None:
            while stalled:
                ctx.target.resume_broker(stalled.pop())

        return Fault(self.kind, live, start, stop)


class KillLeaderNemesis:
    """SIGKILL a partition's current leader; restart it at the end."""

    kind = "kill-leader"

    def plan(self, rng: random.Random, where: PlanInput) -> dict[str, Any]:
        return {"topic": "chaos-queue", "partition": 0}

    def bind(self, params: dict[str, Any], ctx: Context) -> Fault:
        killed: list[int] = []
        live = dict(params)

        def start() -> None:
            leader = LAST_LEADER.pop((params["topic"], params["partition"]), None)
            if leader is None:
                leader, _ = partition_leader(ctx.target.bootstrap, params["topic"], params["partition"])
            live["broker"] = leader
            ctx.target.kill_broker(leader)
            killed.append(leader)

        def stop() -> None:
            while killed:
                ctx.target.restart(killed.pop())

        return Fault(self.kind, live, start, stop)


LEADER_NEMESES = {n.kind: n for n in (StallFollowersNemesis(), KillLeaderNemesis())}


def lossy_schedule(topic: str, *, lag_s: float, session_s: float, start_s: float = 3.0) -> list[Step]:
    """Stall the followers past the ISR lag, kill the leader, resume the followers, restart the leader after
    the controller has fenced it (so the unclean election happens while it is down)."""
    p = {"topic": topic, "partition": 0}
    stall = 1.6 * lag_s + 1.0  # a shrink needs up to 1.5 x lag (checked every lag/2)
    kill_at = start_s + stall - 0.5
    down = 0.5 + session_s + 3.0
    return [Step(0, start_s, stall, "stall-followers", p), Step(1, kill_at, down, "kill-leader", p)]
