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

Two liveness schedules end with replicas that must rejoin the ISR once every fault is healed (the run's recovery
check, chaos/run.py, says whether they did):

`empty-epoch` (issue 18 item 1; needs the client proxies of a proxied cluster):
  1. refuse-produce: every broker's client proxy answers Produce with NOT_LEADER_OR_FOLLOWER, so no leader elected
     meanwhile writes anything in its epoch;
  2. kill-leader: SIGKILL the leader of topic/0; the controller elects another after broker.session.timeout.ms;
     the old one restarts at the end of 2;
  3. kill-leader again: the new leader, which led an epoch without a write, is killed the same way and restarted
     at the end of 3; then produce resumes. The second broker comes back with an epoch-cache entry at its log end
     for an epoch the new leader never had: Kafka's follower truncates it away (UnifiedLog.truncateTo) and rejoins.

`behind-log-start` (issue 18 item 3):
  1. kill-follower: SIGKILL a follower of topic/0's leader; restart it at the end of 1;
  2. delete-consumed: while it is down, DeleteRecords moves topic/0's log start to the smallest offset every
     consumer group has committed (records every consumer already read), past the follower's log end. Restarted,
     the follower is behind the leader's log start: Kafka truncates it fully, starts it there and it rejoins.
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


class KillFollowerNemesis:
    """SIGKILL the first follower (in replica order) of a partition's current leader; restart it at the end."""

    kind = "kill-follower"

    def plan(self, rng: random.Random, where: PlanInput) -> dict[str, Any]:
        return {"topic": "chaos-queue", "partition": 0}

    def bind(self, params: dict[str, Any], ctx: Context) -> Fault:
        killed: list[int] = []
        live = dict(params)

        def start() -> None:
            leader, replicas = partition_leader(ctx.target.bootstrap, params["topic"], params["partition"])
            follower = next(r for r in replicas if r != leader)
            live["leader"], live["broker"] = leader, follower
            ctx.target.kill_broker(follower)
            killed.append(follower)

        def stop() -> None:
            while killed:
                ctx.target.restart(killed.pop())

        return Fault(self.kind, live, start, stop)


class RefuseProduceNemesis:
    """Every broker's client proxy answers Produce with NOT_LEADER_OR_FOLLOWER (nothing reaches a broker, so no
    record is appended anywhere); the toxics go at the end. Needs a proxied target."""

    kind = "refuse-produce"
    TOXIC = "nemesis-refuse-produce"

    def plan(self, rng: random.Random, where: PlanInput) -> dict[str, Any]:
        return {"api_key": 0, "error_code": 6}

    def bind(self, params: dict[str, Any], ctx: Context) -> Fault:
        client = ctx.need_client(self.kind)
        proxies = [ctx.broker_proxy(self.kind, b) for b in ctx.target.broker_ids]

        def start() -> None:
            for proxy in proxies:
                client.add_toxic(proxy, "kafka", name=self.TOXIC, stream="upstream", attributes={
                    "api_key": params["api_key"], "action": "error", "error_code": params["error_code"],
                    "probability": 1.0})

        def stop() -> None:
            for proxy in proxies:
                try:
                    client.remove_toxic(proxy, self.TOXIC)
                except Exception:  # noqa: BLE001 - not added (start failed half-way) or already gone
                    pass

        return Fault(self.kind, {**params, "proxies": proxies}, start, stop)


def committed_floor(bootstrap: str, topic: str, partition: int) -> int | None:
    """The smallest offset of ``topic/partition`` committed by any consumer group (None: no group has one)."""
    from kafka.admin import KafkaAdminClient
    from kafka.structs import TopicPartition

    admin = KafkaAdminClient(bootstrap_servers=bootstrap.split(","), request_timeout_ms=5000)
    try:
        tp = TopicPartition(topic, partition)
        groups = sorted({g["group_id"] for g in admin.list_groups()})
        found = []
        for group in groups:
            meta = admin.list_group_offsets({group: [tp]}).get(group, {}).get(tp)
            if meta is not None and meta.offset >= 0:
                found.append(meta.offset)
        return min(found) if found else None
    finally:
        admin.close()


class DeleteConsumedNemesis:
    """DeleteRecords on a partition up to the smallest offset every consumer group committed: the records go, but
    only ones every consumer already read (so the history checkers see no loss). Nothing to undo."""

    kind = "delete-consumed"

    def plan(self, rng: random.Random, where: PlanInput) -> dict[str, Any]:
        return {"topic": "chaos-queue", "partition": 0}

    def bind(self, params: dict[str, Any], ctx: Context) -> Fault:
        live = dict(params)

        def start() -> None:
            from kafka.admin import KafkaAdminClient
            from kafka.structs import TopicPartition

            floor = committed_floor(ctx.target.bootstrap, params["topic"], params["partition"])
            if floor is None:
                raise LookupError(f"no consumer group committed {params['topic']}-{params['partition']} yet")
            tp = TopicPartition(params["topic"], params["partition"])
            admin = KafkaAdminClient(bootstrap_servers=ctx.target.bootstrap.split(","), request_timeout_ms=10_000)
            try:
                admin.delete_records({tp: floor})
            finally:
                admin.close()
            live["offset"] = floor

        return Fault(self.kind, live, start, lambda: None)


LEADER_NEMESES = {n.kind: n for n in (StallFollowersNemesis(), KillLeaderNemesis(), KillFollowerNemesis(),
                                      RefuseProduceNemesis(), DeleteConsumedNemesis())}


def lossy_schedule(topic: str, *, lag_s: float, session_s: float, start_s: float = 3.0) -> list[Step]:
    """Stall the followers past the ISR lag, kill the leader, resume the followers, restart the leader after
    the controller has fenced it (so the unclean election happens while it is down)."""
    p = {"topic": topic, "partition": 0}
    stall = 1.6 * lag_s + 1.0  # a shrink needs up to 1.5 x lag (checked every lag/2)
    kill_at = start_s + stall - 0.5
    down = 0.5 + session_s + 3.0
    return [Step(0, start_s, stall, "stall-followers", p), Step(1, kill_at, down, "kill-leader", p)]


def empty_epoch_schedule(topic: str, *, session_s: float, start_s: float = 3.0) -> list[Step]:
    """Refuse every Produce, kill the partition's leader, then (after the controller elected another) kill the
    new one, which led an epoch without a write; restart each once its successor leads; produce resumes after."""
    p = {"topic": topic, "partition": 0}
    down = session_s + 3.0             # fenced after the session timeout, a successor elected, with a margin
    first = start_s + 0.5
    second = first + down + 1.0        # after the first restart (end of step 1) and the successor's election
    refuse = second + down - start_s   # until the second broker is back
    return [Step(0, start_s, refuse, "refuse-produce", {"api_key": 0, "error_code": 6}),
            Step(1, first, down, "kill-leader", p), Step(2, second, down, "kill-leader", p)]


def behind_log_start_schedule(topic: str, *, session_s: float, start_s: float = 3.0) -> list[Step]:
    """Kill a follower of the partition's leader; while it is down (and fenced) delete the records every consumer
    read, past its log end; restart it."""
    p = {"topic": topic, "partition": 0}
    down = session_s + 6.0
    return [Step(0, start_s, down, "kill-follower", p),
            Step(1, start_s + session_s + 3.0, 0.0, "delete-consumed", p)]
