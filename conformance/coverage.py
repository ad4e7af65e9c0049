"""Teeth: which reference-broker fault switch breaks which rule — the rule × switch matrix.

Why: a check that cannot fail proves nothing. Each switch in ``reference_broker/faults.py`` breaks a rule on
purpose; ``BREAKS`` lists, per switch, the rules whose checks must diverge under it (and no others).
``tests/conformance/test_conformance_suites.py`` runs the suites with each switch and asserts exactly that, so this
table is measured, not claimed; the HTML report shows it as "rule coverage". A rule with no switch here has checks
nobody has yet shown able to fail.
"""
from __future__ import annotations

from collections.abc import Iterable

# switch → rules whose checks diverge under it (every entry has a row in the FAULTS table of the tests).
BREAKS: dict[str, tuple[str, ...]] = {
    "fetch.min_bytes_exclusive": ("FETCH-MINBYTES-GE",),
    "fetch.no_wake_on_append": ("FETCH-WAKE-ON-APPEND",),
    "fetch.ignore_max_wait": ("FETCH-MAXWAIT-IDLE",),
    "fetch.zero_wait_parks": ("FETCH-MAXWAIT-ZERO",),
    "fetch.oor_as_empty": ("FETCH-OOR-ABOVE-LEO",),
    "list_offsets.earliest_is_zero": ("LIST-OFFSETS-EARLIEST", "RESET-AFTER-DELETE"),
    "list_offsets.timestamp_exclusive": ("LIST-OFFSETS-TIMESTAMP",),
    "offsets.accept_stale_generation": ("OFFSETS-COMMIT-GENERATION", "GROUP-ILLEGAL-GENERATION"),
    "offsets.forget_on_restart": ("OFFSETS-DURABLE",),
    "group.describe_unknown_empty": ("GROUP-DESCRIBE-DEAD",),
    "produce.ignore_min_insync": ("ACKS-ALL-MIN-ISR", "ACKS-ALL-AFTER-SHRINK"),
    "isr.hw_is_leader_leo": ("HW-MIN-LEO-ISR",),
    "isr.never_shrink": ("ISR-SHRINK-LAG",),
    "isr.shrink_early": ("ISR-SHRINK-LAG",),
    "isr.never_expand": ("ISR-EXPAND",),
    "produce.acks_all_ok_after_shrink": ("ACKS-ALL-AFTER-APPEND",),
    "replication.truncate_to_hw": ("HW-FAILOVER",),
    "replication.ignore_diverging_epoch": ("TRUNCATE-BY-EPOCH",),
    "replication.record_diverging_fetch": ("HW-DIVERGING-FOLLOWER",),
    "replication.keep_epoch_at_log_end": ("ISR-REJOIN-AFTER-EMPTY-EPOCH",),
    "replication.cap_start_at_log_end": ("ISR-REJOIN-BEHIND-LOG-START",),
    "fetch.last_fetched_epoch_unchecked": ("FETCH-LAST-FETCHED-EPOCH",),
    "isr.min_isr_not_capped": ("ACKS-ALL-MIN-ISR-ABOVE-RF",),
    "list_offsets.no_offset_not_available": ("LIST-OFFSETS-NOT-AVAILABLE",),
    "isr.idle_follower_lags": ("ISR-IDLE-FOLLOWER",),
    # elr: eligible leader replicas and DescribeTopicPartitions (KIP-966)
    "elr.disabled": ("ELR-SHRINK-BELOW-MIN-ISR",),
    "elr.no_election_from_elr": ("ELR-CLEAN-ELECTION",),
    "describe_topic_partitions.no_limit": ("DTP-PAGINATION",),
    "features.downgrade_as_upgrade": ("FEATURES-UPDATE",),
    # isr_hw: the HW as clients see it
    "fetch.hw_off_by_one": ("HW-CONSISTENT-VIEWS",),
    "fetch.hw_is_read_end": ("HW-MONOTONIC",),
    "isr.hw_ignores_min_isr": ("HW-HOLD-BELOW-MIN-ISR",),
    # clients (conformance/suites/test_clients.py)
    "fetch.drop_headers": ("FETCH-RECORDS-AS-PRODUCED",),
    "fetch.swap_producer_batches": ("FETCH-RECORDS-AS-PRODUCED",),
    "fetch.compressed_base_is_last": ("FETCH-RECORDS-AS-PRODUCED", "CONSUMER-MID-BATCH"),
    "fetch.mid_batch_next_batch": ("FETCH-MID-BATCH", "CONSUMER-MID-BATCH", "RESET-BATCHED"),
    "produce.ignore_max_message_bytes": ("PRODUCE-MAX-MESSAGE-BYTES",),
    "list_offsets.latest_is_last_batch_base": ("RESET-BATCHED",),
    "offsets.uncommitted_is_zero": ("RESET-BATCHED", "RESET-NONE", "RESET-LATEST", "OFFSETS-COMMIT-ROUNDTRIP"),
    # offsets
    "offsets.keep_first_commit": ("OFFSETS-COMMIT-ROUNDTRIP", "CONSUMER-RESUME-COMMITTED"),
    "offsets.accept_unknown_member": ("OFFSETS-COMMIT-UNKNOWN-MEMBER",),
    "offsets.metadata_max_exclusive": ("OFFSETS-METADATA-MAX",),
    "offsets.drop_leader_epoch": ("OFFSETS-LEADER-EPOCH",),
    "offsets.fetch_all_empty": ("OFFSETS-FETCH-ALL",),
    "offsets.visible_before_committed": ("OFFSETS-VISIBLE-WHEN-COMMITTED",),
    "offsets.topic_rf_capped": ("OFFSETS-TOPIC-REPLICATION-FACTOR",),
    # topics
    "topics.nine_configs_only": ("TOPIC-CONFIGS-KAFKA",),
    "metadata.all_topics_hide_internal": ("METADATA-ALL-TOPICS-INTERNAL",),
    "configs.incremental_replaces": ("CONFIGS-INCREMENTAL-TOPIC",),
    "configs.accept_invalid_value": ("CONFIGS-INVALID-REFUSED",),
    "configs.validate_only_applies": ("CONFIGS-VALIDATE-ONLY",),
    "partitions.no_increase_check": ("CREATE-PARTITIONS-INCREASE-ONLY",),
    "partitions.new_leaderless": ("CREATE-PARTITIONS-METADATA",),
    "log_dirs.size_records": ("LOG-DIRS-SIZE",),
    "list_offsets.latest_is_leo": ("LIST-OFFSETS-LATEST",),
    "list_offsets.earliest_is_latest": ("RESET-EARLIEST",),
    "list_offsets.latest_minus_one": ("RESET-LATEST",),
    "list_offsets.timestamp_batch_base": ("LIST-OFFSETS-TIMESTAMP",),
    "list_offsets.max_timestamp_batch_last": ("LIST-OFFSETS-MAX-TIMESTAMP",),
    "list_offsets.earliest_local_unknown": ("LIST-OFFSETS-EARLIEST-LOCAL",),
    "list_offsets.latest_tiered_is_latest": ("LIST-OFFSETS-LATEST-TIERED",),
    # fetch
    "fetch.read_past_hw": ("FETCH-HW-CAP",),
    "fetch.ignore_partition_max_bytes": ("FETCH-PARTITION-MAX-BYTES",),
    "fetch.max_bytes_per_partition": ("FETCH-MAX-BYTES",),
    "fetch.no_min_one": ("FETCH-FIRST-BATCH-WHOLE",),
    "fetch.expired_at_leo_oor": ("FETCH-AT-LEO-EMPTY",),
    "fetch.serve_below_log_start": ("FETCH-OOR-BELOW-LOG-START",),
    "fetch.min_bytes_per_partition": ("FETCH-MULTI-PARTITION",),
    "fetch.min_bytes_uncapped": ("FETCH-MINBYTES-PARTITION-CAP",),
    # group (rebalance suite)
    "group.describe_completing_as_stable": ("GROUP-STATES",),
    "group.initial_delay_quarter": ("GROUP-INITIAL-DELAY",),
    "group.no_member_id_required": ("GROUP-MEMBER-ID-REQUIRED",),
    "group.session_bounds_exclusive": ("GROUP-INVALID-SESSION-TIMEOUT",),
    "group.session_timeout_unchecked": ("GROUP-INVALID-SESSION-TIMEOUT",),
    "group.followers_get_members": ("GROUP-JOIN-REBALANCE",),
    # one mechanism: members learn of a rebalance from Heartbeat — the leave check's remaining member does, and so
    # does librdkafka in the cooperative check (it never rejoins, so the second consumer gets nothing)
    "group.no_rebalance_signal": ("GROUP-HEARTBEAT-REBALANCE-IN-PROGRESS", "GROUP-LEAVE-REBALANCE",
                                  "GROUP-COOPERATIVE-INCREMENTAL"),
    "group.heartbeat_completing_rebalancing": ("GROUP-HEARTBEAT-COMPLETING",),
    "group.sync_in_preparing_ok": ("GROUP-SYNC-REBALANCE-IN-PROGRESS",),
    "group.commit_in_completing_ok": ("OFFSET-COMMIT-COMPLETING",),
    "group.commit_in_preparing_refused": ("OFFSET-COMMIT-PREPARING",),
    "group.ignore_generation": ("GROUP-ILLEGAL-GENERATION",),
    "group.sync_unknown_member_ok": ("GROUP-UNKNOWN-MEMBER",),
    "group.leave_no_rebalance": ("GROUP-LEAVE-REBALANCE",),
    "group.session_expires_early": ("GROUP-SESSION-TIMEOUT",),
    "group.static_rejoin_rebalances": ("GROUP-STATIC-REJOIN",),
    "group.fenced_as_unknown": ("GROUP-STATIC-FENCED",),
    "group.fence_on_metadata_change": ("GROUP-COOPERATIVE-INCREMENTAL",),
    "group.join_waits_session": ("GROUP-REBALANCE-TIMEOUT",),
    # one mechanism: a member owing its SyncGroup is never expired (silent leader, member gone mid-join)
    "group.owed_sync_never_expires": ("GROUP-SYNC-LEADER-GONE", "GROUP-DISCONNECT-RECOVERS"),
    "group.abandoned_leader_kept": ("GROUP-JOIN-ABANDONED",),
    "group.expired_member_zombie": ("GROUP-EXPIRED-REJOIN",),
    "group.leader_member_list_capped": ("GROUP-MANY-MEMBERS",),
    "group.left_out_member_refused": ("GROUP-SYNC-ASSIGNMENT",),
    # produce (idempotent producers)
    "init_producer_id.bump_epoch": ("INIT-PRODUCER-ID-IDEMPOTENT",),
    "produce.duplicate_window_one": ("PRODUCE-IDEMPOTENT-DUPLICATE",),
    "produce.producer_state_not_loaded": ("PRODUCE-IDEMPOTENT-FAILOVER",),
    "replication.truncation_forgets_producers": ("PRODUCE-IDEMPOTENT-TRUNCATION",),
    # transactions (conformance/suites/test_transactions.py; the switches come with the reference broker's
    # transaction coordinator, notes/TXN_SPEC.md)
    "txn.no_aborted_list": ("TXN-READ-COMMITTED-ABORTED",),
    # one mechanism: an open transaction does not hold the LSO back, so read_committed reads into it
    "txn.lso_is_hw": ("TXN-READ-COMMITTED-OPEN", "TXN-LSO"),
    "txn.commit_first_partition_only": ("TXN-COMMIT-VISIBLE",),
    "txn.abort_as_commit": ("TXN-ABORT-INVISIBLE",),
    "txn.offsets_eager": ("TXN-OFFSETS-AT-COMMIT",),
    "txn.ignore_require_stable": ("TXN-REQUIRE-STABLE",),
    "txn.no_fencing": ("TXN-FENCING",),
    "txn.no_timeout": ("TXN-TIMEOUT-ABORTS",),
    "txn.no_concurrent_check": ("TXN-CONCURRENT",),
    "txn.no_partition_verification": ("TXN-VERIFY-PARTITION",),
    "txn.markers_leader_only": ("TXN-MARKERS-FAILOVER",),
    "txn.no_epoch_bump": ("TXN-TV2-EPOCH-BUMP",),
    "txn.tv2_no_retry": ("TXN-TV2-RETRY",),
    "txn.no_implicit_add": ("TXN-TV2-IMPLICIT-ADD",),
    "txn.offset_commit_group_not_found": ("TXN-OFFSET-COMMIT-UNKNOWN-GROUP",),
    "txn.offset_commit_group_first": ("TXN-OFFSET-COMMIT-PRECEDENCE",),
    "txn.list_duration_ongoing_only": ("TXN-LIST-FILTERS",),
    "txn.describe_producers_no_txn_start": ("TXN-DESCRIBE-PRODUCERS",),
    # the partition leader's side (issue 24)
    "txn.produce_txn_checks_off": ("TXN-NO-HANGING",),
    "txn.tv2_marker_epoch_as_tv1": ("TXN-MARKER-EPOCH",),
    "txn.lso_below_log_start": ("TXN-LSO-LOG-START",),
    "txn.abort_index_every_marker": ("TXN-ABORTED-LIST-WROTE",),
    "txn.tv2_any_first_sequence": ("TXN-TV2-FIRST-SEQUENCE",),
    "txn.coordinator_epoch_unchecked": ("TXN-MARKER-COORDINATOR-EPOCH",),
    "txn.timeout_abort_unchecked": ("TXN-TIMEOUT-RACE",),
    "txn.tv2_timeout_double_bump": ("TXN-TV2-TIMEOUT-EPOCH",),
    "txn.markers_not_pending": ("TXN-CONCURRENT-END",),
    "txn.complete_gives_up": ("TXN-COMPLETE-LIVENESS",),
    # KIP-848 consumer groups (conformance/suites/test_consumer_protocol.py)
    "consumer.join_answer_no_assignment": ("CGP-JOIN-ASSIGNMENT",),
    "consumer.assign_before_revoke": ("CGP-REVOKE-BEFORE-ASSIGN",),
    "consumer.accept_any_epoch": ("CGP-FENCED-EPOCH",),
    "consumer.session_never_expires": ("CGP-SESSION-EXPIRY",),
    "consumer.unrevoked_member_kept": ("CGP-VANISH-MID-RECONCILIATION",),
    "consumer.session_expires_early": ("CGP-SESSION-EXPIRY",),
    "consumer.leave_no_rebalance": ("CGP-LEAVE",),
    "consumer.group_epoch_reset_on_leave": ("CGP-EPOCHS-GROW",),
    "consumer.static_replace_live": ("CGP-STATIC-UNRELEASED",),
    "consumer.any_assignor": ("CGP-UNSUPPORTED-ASSIGNOR",),
    "consumer.commit_ignores_member_epoch": ("CGP-OFFSET-STALE-EPOCH",),
    "consumer.no_rebalance_timeout": ("CGP-REBALANCE-TIMEOUT",),
    "consumer.metadata_not_refreshed": ("CGP-TOPIC-CREATED",),
    "consumer.static_leave_is_leave": ("CGP-STATIC-REJOIN",),
    "consumer.regex_search": ("CGP-REGEX",),
    # the controller quorum (conformance/suites/test_quorum.py; 3 brokers beside 3 dedicated controllers)
    "raft.no_fetch_timeout": ("QUORUM-FAILOVER-KILL", "QUORUM-FAILOVER-PAUSE", "QUORUM-METADATA-AFTER-FAILOVER"),
    "quorum.no_activation_after_failover": ("QUORUM-METADATA-AFTER-FAILOVER",),
    "describe_quorum.no_observers": ("QUORUM-DESCRIBE",),
}


def switches_by_rule(rule_ids: Iterable[str]) -> dict[str, list[str]]:
    """{rule id: [switches that break it]} for every given rule (an empty list: no teeth yet)."""
    out: dict[str, list[str]] = {r: [] for r in rule_ids}
    for switch, rules in BREAKS.items():
        for r in rules:
            if r in out:
                out[r].append(switch)
    return out
