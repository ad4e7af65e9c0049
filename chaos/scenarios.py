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
    down = 0.5 + session_s + 3.0
    return [Step(0, start_s, stall, "stall-followers", p), Step(1, kill_at, down, "kill-leader", p)]
