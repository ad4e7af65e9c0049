"""Test-only fault switches: named, deliberate departures from Kafka's rules.

They exist to prove that conformance checks can fail: a suite run against ``--fault NAME`` must report the
divergence its rule describes. Off by default; enabled only by ``python -m reference_broker serve --fault NAME``
(repeatable). Each switch names the rule it breaks. Never used by anything but tests.
"""
from __future__ import annotations

from collections.abc import Iterable

FAULTS: dict[str, str] = {
    "fetch.min_bytes_exclusive": "DelayedFetch Case G completes only at accumulated > min_bytes (Kafka: >=)",
    "fetch.no_wake_on_append": "an append does not wake parked fetches; they answer only at max_wait",
    "fetch.ignore_max_wait": "a fetch that would park is answered at once, empty",
    "fetch.read_past_hw": "consumers read up to the log end offset instead of the high watermark",
    "fetch.oor_as_empty": "fetch offsets beyond the log end answer empty instead of OFFSET_OUT_OF_RANGE",
    "offsets.accept_stale_generation": "OffsetCommit ignores the generation (Kafka: ILLEGAL_GENERATION)",
    "offsets.forget_on_restart": "committed offsets are not replayed when the broker restarts",
    "group.no_rebalance_signal": "Heartbeat answers NONE in PreparingRebalance (Kafka: REBALANCE_IN_PROGRESS) — "
                                 "breaks GROUP-HEARTBEAT-REBALANCE-IN-PROGRESS (and the rules whose members learn "
                                 "of a rebalance that way: GROUP-LEAVE-REBALANCE, GROUP-COOPERATIVE-INCREMENTAL)",
    "produce.ignore_min_insync": "acks=all ignores min.insync.replicas (Kafka: NOT_ENOUGH_REPLICAS when the ISR is "
                                 "smaller, Partition.appendRecordsToLeader)",
    "list_offsets.latest_is_leo": "ListOffsets LATEST answers the log end offset instead of the high watermark",
    "list_offsets.earliest_is_zero": "ListOffsets EARLIEST answers 0, ignoring the log start offset DeleteRecords "
                                     "moved — breaks LIST-OFFSETS-EARLIEST",
    "list_offsets.timestamp_exclusive": "ListOffsets by timestamp finds the first record with timestamp > it "
                                        "(Kafka: >=) — breaks LIST-OFFSETS-TIMESTAMP",
    "fetch.zero_wait_parks": "a fetch with max_wait_ms=0 that cannot reach min_bytes parks for 2 s (Kafka: "
                             "answers at once) — breaks FETCH-MAXWAIT-ZERO",
    "group.describe_unknown_empty": "DescribeGroups of an unknown group answers state Empty (Kafka: Dead) — breaks "
                                    "GROUP-DESCRIBE-DEAD",
    # replication (ISR-HW suite)
    "isr.hw_is_leader_leo": "the leader's HW is its own LEO, ignoring in-sync followers (Kafka: min LEO over the "
                            "ISR, Partition.maybeIncrementLeaderHW) — breaks HW-MIN-LEO-ISR",
    "isr.never_shrink": "a lagging follower is never removed from the ISR — breaks ISR-SHRINK-LAG",
    "isr.shrink_early": "followers leave the ISR after a quarter of replica.lag.time.max.ms — breaks ISR-SHRINK-LAG",
    "isr.never_expand": "a follower that caught up is never added back to the ISR — breaks ISR-EXPAND",
    "isr.hw_ignores_min_isr": "the HW advances while the ISR is below min.insync.replicas (before KAFKA-15583)",
    "produce.acks_all_ok_after_shrink": "an acks=all produce whose ISR shrank below min.insync.replicas after the "
                                        "append answers NONE (Kafka: NOT_ENOUGH_REPLICAS_AFTER_APPEND or a "
                                        "timeout) — breaks ACKS-ALL-AFTER-APPEND",
    "replication.truncate_to_hw": "a follower that becomes leader first truncates its log to its own high "
                                  "watermark (the pre-KIP-101 rule) — breaks HW-FAILOVER",
    "replication.ignore_diverging_epoch": "followers ignore diverging_epoch and never truncate (Kafka: truncate by "
                                          "leader epoch, KIP-101/KIP-320) — breaks TRUNCATE-BY-EPOCH",
    # group (rebalance suite): one switch per classic-group rule, each named after the mechanism it breaks
    "group.describe_completing_as_stable": "DescribeGroups reports CompletingRebalance as Stable — breaks GROUP-STATES",
    "group.initial_delay_quarter": "the first rebalance of an Empty group waits a quarter of "
                                   "group.initial.rebalance.delay.ms — breaks GROUP-INITIAL-DELAY",
    "group.no_member_id_required": "JoinGroup v4+ without a member id joins at once (Kafka: MEMBER_ID_REQUIRED, "
                                   "KIP-394) — breaks GROUP-MEMBER-ID-REQUIRED",
    "group.session_bounds_exclusive": "a session timeout equal to group.min/max.session.timeout.ms is refused "
                                      "(Kafka: the bounds are allowed) — breaks GROUP-INVALID-SESSION-TIMEOUT",
    "group.session_timeout_unchecked": "JoinGroup accepts any session timeout (Kafka: INVALID_SESSION_TIMEOUT "
                                       "outside the bounds) — breaks GROUP-INVALID-SESSION-TIMEOUT",
    "group.followers_get_members": "JoinGroup answers followers the member list too (Kafka: the leader only) — "
                                   "breaks GROUP-JOIN-REBALANCE",
    "group.heartbeat_completing_rebalancing": "Heartbeat in CompletingRebalance answers REBALANCE_IN_PROGRESS "
                                              "(Kafka: NONE) — breaks GROUP-HEARTBEAT-COMPLETING",
    "group.sync_in_preparing_ok": "SyncGroup in PreparingRebalance answers NONE with the old assignment (Kafka: "
                                  "REBALANCE_IN_PROGRESS) — breaks GROUP-SYNC-REBALANCE-IN-PROGRESS",
    "group.commit_in_completing_ok": "OffsetCommit in CompletingRebalance is accepted (Kafka: "
                                     "REBALANCE_IN_PROGRESS) — breaks OFFSET-COMMIT-COMPLETING",
    "group.commit_in_preparing_refused": "OffsetCommit in PreparingRebalance answers REBALANCE_IN_PROGRESS "
                                         "(Kafka: accepted) — breaks OFFSET-COMMIT-PREPARING",
    "group.ignore_generation": "Heartbeat and SyncGroup ignore the generation (Kafka: ILLEGAL_GENERATION) — "
                               "breaks GROUP-ILLEGAL-GENERATION",
    "group.sync_unknown_member_ok": "SyncGroup from a member id the group does not have answers NONE, empty "
                                    "(Kafka: UNKNOWN_MEMBER_ID) — breaks GROUP-UNKNOWN-MEMBER",
    "group.leave_no_rebalance": "LeaveGroup of a member that is not the last removes it without a rebalance "
                                "— breaks GROUP-LEAVE-REBALANCE",
    "group.session_expires_early": "members expire after half their session timeout — breaks "
                                   "GROUP-SESSION-TIMEOUT",
    "group.static_rejoin_rebalances": "a static member rejoining a Stable group unchanged starts a rebalance "
                                      "(Kafka: no rebalance, KIP-345) — breaks GROUP-STATIC-REJOIN",
    "group.fenced_as_unknown": "a replaced static member's old id answers UNKNOWN_MEMBER_ID (Kafka: "
                               "FENCED_INSTANCE_ID) — breaks GROUP-STATIC-FENCED",
    "group.fence_on_metadata_change": "a member rejoining with changed metadata (cooperative owned partitions) "
                                      "is answered UNKNOWN_MEMBER_ID, so it loses all its partitions — breaks "
                                      "GROUP-COOPERATIVE-INCREMENTAL",
    "group.join_waits_session": "the join phase ignores the rebalance timeout: members that do not rejoin are "
                                "dropped only when their session expires — breaks GROUP-REBALANCE-TIMEOUT",
    "group.owed_sync_never_expires": "a member that joined a generation but never sent its SyncGroup is kept "
                                     "forever (no pending-sync expiry, session not enforced) — breaks "
                                     "GROUP-SYNC-LEADER-GONE and GROUP-DISCONNECT-RECOVERS",
    "group.expired_member_zombie": "a member removed by session expiry still gets NONE for its Heartbeat "
                                   "(Kafka: UNKNOWN_MEMBER_ID) — breaks GROUP-EXPIRED-REJOIN",
    "group.leader_member_list_capped": "the leader's JoinGroup answer lists at most 16 members — breaks "
                                       "GROUP-MANY-MEMBERS",
}


class FaultError(ValueError):
    """An unknown fault name."""


class Faults:
    """The set of enabled fault switches; ``faults.on("fetch.no_wake_on_append")``."""

    def __init__(self, names: Iterable[str] = ()) -> None:
        enabled = set(names)
        unknown = enabled - FAULTS.keys()
        if unknown:
            raise FaultError(f"unknown fault(s) {', '.join(sorted(unknown))}; known: {', '.join(sorted(FAULTS))}")
        self.enabled = frozenset(enabled)

    def on(self, name: str) -> bool:
        assert name in FAULTS, name
        return name in self.enabled
