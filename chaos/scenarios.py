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

from .nemesis.kill_leader import KillLeaderNemesis
from .nemesis.schedule import Step
from .nemesis.stall_followers import StallFollowersNemesis

LEADER_NEMESES = {n.kind: n for n in (StallFollowersNemesis(), KillLeaderNemesis())}


def lossy_schedule(topic: str, *, lag_s: float, session_s: float, start_s: float = 3.0) -> list[Step]:
    """Stall the followers past the ISR lag, kill the leader, resume the followers, restart the leader after
    the controller has fenced it (so the unclean election happens while it is down)."""
    p = {"topic": topic, "partition": 0}
    stall = 1.6 * lag_s + 1.0  # a shrink needs up to 1.5 x lag (checked every lag/2)
    kill_at = start_s + stall - 0.5
    # The kill waits (up to 4 x lag) until the leader's own Metadata shows it alone in the ISR, then 1 s of writes
    # acknowledged by it alone: at a fixed time it came before the shrink under load, and nothing could be lost
    # (seen: Kafka, Java client, seed 2, twice). So the followers stay stopped until after the latest possible kill,
    # and the leader stays down as long after their resume as before (fenced, a follower elected uncleanly).
    wait = 4 * lag_s
    resume_at = start_s + stall + wait + 1.0
    down = (resume_at - kill_at) + 0.5 + session_s + 3.0
    return [Step(0, start_s, resume_at - start_s, "stall-followers", p),
            Step(1, kill_at, down, "kill-leader", {**p, "await_isr_alone": wait, "acked_alone_s": 1.0})]


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
