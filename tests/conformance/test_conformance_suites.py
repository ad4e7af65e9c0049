"""The conformance suites, run as a user runs them (pytest in a subprocess, results JSON parsed):

- against the reference broker every check passes (or is skipped with a reason) — the suites agree with the
  executable spec;
- against the reference broker with a fault switch that breaks one rule, the results *and the HTML report* show a
  divergence for exactly that rule — so each check can fail, and fails for the right reason.
"""
from __future__ import annotations

import html
import json
import os
import signal
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from conformance.coverage import BREAKS, switches_by_rule
from history import read as read_history
from reference_broker.faults import FAULTS as SWITCHES

ROOT = Path(__file__).resolve().parents[2]
FETCH = "conformance/suites/test_fetch.py"
OFFSETS = "conformance/suites/test_offsets.py"
ISR_HW = "conformance/suites/test_isr_hw.py"
REBALANCE = "conformance/suites/test_rebalance.py"
CLIENTS = "conformance/suites/test_clients.py"
PRODUCE = "conformance/suites/test_produce.py"
TOPICS = "conformance/suites/test_topics.py"
TXN = "conformance/suites/test_transactions.py"
QUORUM = "conformance/suites/test_quorum.py"
# suites whose rules need a target shape of their own (the switch rows run them so)
SUITE_CONFIG = {QUORUM: ("--target-config", "brokers=3", "--target-config", "controllers=3")}
ELR = "conformance/suites/test_elr.py"


def run_suites(tmp_path: Path, paths: list[str], *extra: str, name: str = "results", target: str = "reference",
               timeout_s: float = 280) -> dict:
    """Run suites in a child pytest against a target (the reference by default); return the parsed results file."""
    results = tmp_path / f"{name}.json"
    cmd = [sys.executable, "-m", "pytest", *paths, "-q", "-p", "no:cacheprovider", "--target", target,
           "--kct-results-file", str(results), *extra]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        # SIGINT, not SIGKILL first: the child's fixtures then stop its brokers by PID, and pytest prints where the
        # check was stuck. (A kill once left two brokers listening after a hung row.)
        proc.send_signal(signal.SIGINT)
        try:
            out, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        raise AssertionError(f"the suite run did not finish within {timeout_s:g} s: {' '.join(cmd[3:])}\n{out[-4000:]}"
                             f"\n{err[-3000:]}") from None
    assert proc.returncode in (0, 1), f"pytest could not run the suite ({proc.returncode}):\n{out[-3000:]}" \
                                      f"\n{err[-3000:]}"
    assert results.exists(), f"no results file written:\n{out[-3000:]}"
    doc = json.loads(results.read_text())
    doc["_stdout"] = out
    return doc


def by_rule(doc: dict) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for c in doc["checks"]:
        for r in c["rules"]:
            out.setdefault(r, set()).add(c["outcome"])
    return out


def test_fetch_and_offsets_suites_pass_against_reference(tmp_path: Path) -> None:
    doc = run_suites(tmp_path, [FETCH, OFFSETS, TOPICS])
    bad = [(c["nodeid"], c["outcome"], c["message"]) for c in doc["checks"] if c["outcome"] in ("divergence", "error")]
    assert not bad, f"the reference broker must pass every check:\n{json.dumps(bad, indent=1)}"
    assert len(doc["checks"]) >= 30 and doc["summary"]["pass"] >= 30, doc["summary"]
    for c in doc["checks"]:
        assert c["rules"] and all(r in doc["rules"] for r in c["rules"]), c["nodeid"]
        if c["outcome"] == "skipped":
            assert c["message"], f"{c['nodeid']} skipped without a reason"
    assert doc["target"]["name"] == "reference" and doc["target"]["version"]
    # Every rule the two suites declare was checked somewhere.
    declared = {r for r, meta in doc["rules"].items() if meta["suite"] in ("fetch", "offsets", "topics")}
    assert declared <= set(by_rule(doc)), f"rules without a check: {declared - set(by_rule(doc))}"
    # The run wrote its operations as a history under one run id, and it satisfies the history contract.
    (hist,) = read_history(doc["history"])
    assert hist.run_id == doc["run_id"] and hist.target == "reference"
    fs = {op["f"] for op in hist.ops}
    assert {"send", "fetch", "poll", "commit", "fetch_offsets", "list_offsets", "delete_records", "assign"} <= fs, fs
    assert doc["duration_s"] < 120, f"fetch+offsets took {doc['duration_s']} s against the reference broker"


# (fault switch, suite, -k expression selecting the checks of the rule and a neighbour, rule that must diverge,
#  rules among the selected checks that must still pass)
CGP = "conformance/suites/test_consumer_protocol.py"
FAULTS = [
    ("fetch.min_bytes_exclusive", FETCH, "min_bytes", "FETCH-MINBYTES-GE", set()),
    ("fetch.no_wake_on_append", FETCH, "wakes_on_append or max_wait_honoured", "FETCH-WAKE-ON-APPEND",
     {"FETCH-MAXWAIT-IDLE"}),
    ("fetch.ignore_max_wait", FETCH, "max_wait_honoured or above_leo", "FETCH-MAXWAIT-IDLE",
     {"FETCH-OOR-ABOVE-LEO"}),
    ("fetch.oor_as_empty", FETCH, "above_leo or at_leo", "FETCH-OOR-ABOVE-LEO", {"FETCH-AT-LEO-EMPTY"}),
    ("fetch.zero_wait_parks", FETCH, "max_wait_zero or max_wait_honoured", "FETCH-MAXWAIT-ZERO",
     {"FETCH-MAXWAIT-IDLE"}),
    ("list_offsets.earliest_is_zero", OFFSETS, "earliest_follows or latest_after", "LIST-OFFSETS-EARLIEST",
     {"LIST-OFFSETS-LATEST"}),
    ("list_offsets.timestamp_exclusive", OFFSETS, "by_timestamp or earliest_follows", "LIST-OFFSETS-TIMESTAMP",
     {"LIST-OFFSETS-EARLIEST"}),
    ("group.describe_unknown_empty", REBALANCE, "unknown_group_is_dead or member_id_required",
     "GROUP-DESCRIBE-DEAD", {"GROUP-MEMBER-ID-REQUIRED"}),
    ("offsets.accept_stale_generation", OFFSETS, "generation or unknown_member", "OFFSETS-COMMIT-GENERATION",
     {"OFFSETS-COMMIT-UNKNOWN-MEMBER"}),
    ("offsets.forget_on_restart", OFFSETS, "survive_restart or round_trip", "OFFSETS-DURABLE",
     {"OFFSETS-COMMIT-ROUNDTRIP"}),
    ("isr.idle_follower_lags", ISR_HW, "idle_follower", "ISR-IDLE-FOLLOWER", set()),
    ("list_offsets.no_offset_not_available", ISR_HW, "not_available_while", "LIST-OFFSETS-NOT-AVAILABLE", set()),
    ("isr.min_isr_not_capped", ISR_HW, "capped_by_replication or hw_views", "ACKS-ALL-MIN-ISR-ABOVE-RF",
     {"HW-CONSISTENT-VIEWS"}),
    # replication rules, each on a fresh 3-broker reference cluster
    ("isr.hw_is_leader_leo", ISR_HW, "min_leo_over_isr", "HW-MIN-LEO-ISR", set()),
    ("isr.never_shrink", ISR_HW, "shrinks_after_lag", "ISR-SHRINK-LAG", set()),
    ("isr.shrink_early", ISR_HW, "shrinks_after_lag", "ISR-SHRINK-LAG", set()),
    ("isr.never_expand", ISR_HW, "shrinks_after_lag", "ISR-EXPAND", set()),
    ("produce.ignore_min_insync", ISR_HW, "refused_after_isr_shrinks", "ACKS-ALL-MIN-ISR", set()),
    ("produce.ignore_min_insync", ISR_HW, "refused_after_isr_shrinks", "ACKS-ALL-AFTER-SHRINK", set()),
    ("produce.acks_all_ok_after_shrink", ISR_HW, "shrinks_while_waiting", "ACKS-ALL-AFTER-APPEND", set()),
    ("replication.truncate_to_hw", ISR_HW, "across_failover", "HW-FAILOVER", set()),
    ("replication.ignore_diverging_epoch", ISR_HW, "truncates_by_leader_epoch", "TRUNCATE-BY-EPOCH", set()),
    ("replication.record_diverging_fetch", ISR_HW, "diverging_follower", "HW-DIVERGING-FOLLOWER", set()),
    ("replication.keep_epoch_at_log_end", ISR_HW, "empty_epoch", "ISR-REJOIN-AFTER-EMPTY-EPOCH", set()),
    ("replication.cap_start_at_log_end", ISR_HW, "behind_the_log_start", "ISR-REJOIN-BEHIND-LOG-START", set()),
    ("fetch.last_fetched_epoch_unchecked", ISR_HW, "last_fetched_epoch or hw_views", "FETCH-LAST-FETCHED-EPOCH",
     {"HW-CONSISTENT-VIEWS"}),
    # elr (KIP-966): the replication rules on a fresh 3-broker reference cluster
    ("elr.disabled", ELR, "joins_the_elr or pages", "ELR-SHRINK-BELOW-MIN-ISR", {"DTP-PAGINATION"}),
    ("elr.no_election_from_elr", ELR, "clean_election", "ELR-CLEAN-ELECTION", set()),
    ("describe_topic_partitions.no_limit", ELR, "pages or update_features", "DTP-PAGINATION", {"FEATURES-UPDATE"}),
    ("features.downgrade_as_upgrade", ELR, "update_features or pages", "FEATURES-UPDATE", {"DTP-PAGINATION"}),
    # isr_hw: the HW as clients see it
    ("fetch.hw_off_by_one", ISR_HW, "hw_views or hw_never_decreases", "HW-CONSISTENT-VIEWS", {"HW-MONOTONIC"}),
    ("fetch.hw_is_read_end", ISR_HW, "hw_never_decreases or hw_views", "HW-MONOTONIC", {"HW-CONSISTENT-VIEWS"}),
    ("isr.hw_ignores_min_isr", ISR_HW, "held_while_isr_below", "HW-HOLD-BELOW-MIN-ISR", set()),
    # clients: real clients, realistic data shapes
    ("fetch.drop_headers", CLIENTS, "keys_headers and confluent or max_message", "FETCH-RECORDS-AS-PRODUCED",
     {"PRODUCE-MAX-MESSAGE-BYTES"}),
    ("fetch.swap_producer_batches", CLIENTS, "interleaving and python or seek and python", "FETCH-RECORDS-AS-PRODUCED",
     {"CONSUMER-MID-BATCH"}),
    ("fetch.compressed_base_is_last", CLIENTS, "compressed_batches and confluent and zstd or max_message",
     "FETCH-RECORDS-AS-PRODUCED", {"PRODUCE-MAX-MESSAGE-BYTES"}),
    ("fetch.compressed_base_is_last", CLIENTS, "seek and confluent or reset_none and confluent", "CONSUMER-MID-BATCH",
     {"RESET-BATCHED"}),
    ("fetch.mid_batch_next_batch", CLIENTS, "seek and python or keys_headers and python", "CONSUMER-MID-BATCH",
     {"FETCH-RECORDS-AS-PRODUCED"}),
    ("fetch.mid_batch_next_batch", CLIENTS, "resume and python or max_message", "CONSUMER-MID-BATCH",
     {"PRODUCE-MAX-MESSAGE-BYTES"}),
    ("fetch.mid_batch_next_batch", CLIENTS, "reset_earliest and python or max_message", "RESET-BATCHED",
     {"PRODUCE-MAX-MESSAGE-BYTES"}),
    ("produce.ignore_max_message_bytes", CLIENTS, "max_message or reset_none and python", "PRODUCE-MAX-MESSAGE-BYTES",
     {"RESET-BATCHED"}),
    ("list_offsets.latest_is_last_batch_base", CLIENTS, "reset_latest and python or keys_headers and python",
     "RESET-BATCHED", {"FETCH-RECORDS-AS-PRODUCED"}),
    ("offsets.uncommitted_is_zero", CLIENTS, "reset_none and confluent or keys_headers and confluent",
     "RESET-BATCHED", {"FETCH-RECORDS-AS-PRODUCED"}),
    ("offsets.uncommitted_is_zero", OFFSETS, "reset_none or reset_earliest", "RESET-NONE", {"RESET-EARLIEST"}),
    ("offsets.uncommitted_is_zero", OFFSETS, "reset_latest or list_offsets_latest", "RESET-LATEST",
     {"LIST-OFFSETS-LATEST"}),
    ("offsets.uncommitted_is_zero", OFFSETS, "round_trip or by_timestamp", "OFFSETS-COMMIT-ROUNDTRIP",
     {"LIST-OFFSETS-TIMESTAMP"}),
    # offsets: commit/fetch, ListOffsets, and the consumer behaviour that rests on them
    ("offsets.keep_first_commit", OFFSETS, "round_trip_with or metadata_size", "OFFSETS-COMMIT-ROUNDTRIP",
     {"OFFSETS-METADATA-MAX"}),
    ("offsets.keep_first_commit", OFFSETS, "resumes_inside or reset_none", "CONSUMER-RESUME-COMMITTED",
     {"RESET-NONE"}),
    ("offsets.accept_unknown_member", OFFSETS, "unknown_member or generation", "OFFSETS-COMMIT-UNKNOWN-MEMBER",
     {"OFFSETS-COMMIT-GENERATION"}),
    ("offsets.metadata_max_exclusive", OFFSETS, "metadata_size or leader_epoch", "OFFSETS-METADATA-MAX",
     {"OFFSETS-LEADER-EPOCH"}),
    ("offsets.drop_leader_epoch", OFFSETS, "leader_epoch or fetch_all", "OFFSETS-LEADER-EPOCH", {"OFFSETS-FETCH-ALL"}),
    ("offsets.fetch_all_empty", OFFSETS, "fetch_all or value_boundaries", "OFFSETS-FETCH-ALL",
     {"OFFSETS-COMMIT-ROUNDTRIP"}),
    ("list_offsets.latest_is_leo", OFFSETS, "follower_lags", "LIST-OFFSETS-LATEST", set()),
    ("offsets.visible_before_committed", OFFSETS, "visible_once_committed or round_trip_with",
     "OFFSETS-VISIBLE-WHEN-COMMITTED", {"OFFSETS-COMMIT-ROUNDTRIP"}),
    ("offsets.topic_rf_capped", OFFSETS, "waits_for_its_replication_factor", "OFFSETS-TOPIC-REPLICATION-FACTOR",
     set()),
    # topics
    ("topics.nine_configs_only", TOPICS, "kafka_topic_config or all_topics", "TOPIC-CONFIGS-KAFKA", {"METADATA-ALL-TOPICS-INTERNAL"}),
    ("metadata.all_topics_hide_internal", TOPICS, "all_topics or kafka_topic_config", "METADATA-ALL-TOPICS-INTERNAL", {"TOPIC-CONFIGS-KAFKA"}),
    # the admin APIs behind Kafka's tools (issue 27)
    ("configs.incremental_replaces", TOPICS, "changes_only_the_named or no_increase", "CONFIGS-INCREMENTAL-TOPIC",
     {"CREATE-PARTITIONS-INCREASE-ONLY"}),
    ("configs.accept_invalid_value", TOPICS, "invalid_topic_config_value or changes_only_the_named",
     "CONFIGS-INVALID-REFUSED", {"CONFIGS-INCREMENTAL-TOPIC"}),
    ("configs.validate_only_applies", TOPICS, "validate_only_alter or changes_only_the_named", "CONFIGS-VALIDATE-ONLY",
     {"CONFIGS-INCREMENTAL-TOPIC"}),
    ("partitions.no_increase_check", TOPICS, "no_increase or new_partitions_are", "CREATE-PARTITIONS-INCREASE-ONLY",
     {"CREATE-PARTITIONS-METADATA"}),
    ("partitions.new_leaderless", TOPICS, "new_partitions_are or no_increase", "CREATE-PARTITIONS-METADATA",
     {"CREATE-PARTITIONS-INCREASE-ONLY"}),
    ("log_dirs.size_records", TOPICS, "log_dirs_reports or changes_only_the_named", "LOG-DIRS-SIZE",
     {"CONFIGS-INCREMENTAL-TOPIC"}),
    ("list_offsets.earliest_is_latest", OFFSETS, "reset_earliest and not delete or reset_none", "RESET-EARLIEST",
     {"RESET-NONE"}),
    ("list_offsets.latest_minus_one", OFFSETS, "reset_latest or reset_none", "RESET-LATEST", {"RESET-NONE"}),
    ("list_offsets.earliest_is_zero", OFFSETS, "below_log_start and python", "RESET-AFTER-DELETE", set()),
    ("list_offsets.timestamp_batch_base", OFFSETS, "timestamp_boundaries or max_timestamp", "LIST-OFFSETS-TIMESTAMP",
     {"LIST-OFFSETS-MAX-TIMESTAMP"}),
    ("list_offsets.max_timestamp_batch_last", OFFSETS, "max_timestamp or timestamp_boundaries",
     "LIST-OFFSETS-MAX-TIMESTAMP", {"LIST-OFFSETS-TIMESTAMP"}),
    ("list_offsets.earliest_local_unknown", OFFSETS, "earliest_local or latest_tiered", "LIST-OFFSETS-EARLIEST-LOCAL",
     {"LIST-OFFSETS-LATEST-TIERED"}),
    ("list_offsets.latest_tiered_is_latest", OFFSETS, "latest_tiered or earliest_local", "LIST-OFFSETS-LATEST-TIERED",
     {"LIST-OFFSETS-EARLIEST-LOCAL"}),
    # fetch: each switch against its rule's checks (boundaries included) and a neighbour that must still pass
    ("fetch.read_past_hw", FETCH, "capped_at_hw_while_follower_lags or never_pass or max_wait_zero_answers_at_once_on",
     "FETCH-HW-CAP", {"FETCH-MAXWAIT-ZERO"}),
    ("fetch.ignore_partition_max_bytes", FETCH, "partition_max_bytes or max_bytes_caps_the_response",
     "FETCH-PARTITION-MAX-BYTES", {"FETCH-MAX-BYTES"}),
    ("fetch.max_bytes_per_partition", FETCH, "max_bytes_shared or max_bytes_caps", "FETCH-MAX-BYTES",
     {"FETCH-PARTITION-MAX-BYTES"}),
    ("fetch.no_min_one", FETCH, "first_batch or partition_max_bytes_boundaries", "FETCH-FIRST-BATCH-WHOLE",
     {"FETCH-PARTITION-MAX-BYTES"}),
    ("fetch.expired_at_leo_oor", FETCH, "at_leo or above_leo or offset_positions or max_wait_honoured or never_pass",
     "FETCH-AT-LEO-EMPTY", {"FETCH-OOR-ABOVE-LEO", "FETCH-OOR-BELOW-LOG-START", "FETCH-MID-BATCH", "FETCH-HW-CAP",
                            "FETCH-MAXWAIT-IDLE"}),
    ("fetch.serve_below_log_start", FETCH, "below_log_start or log_start_passes or offset_positions or never_pass",
     "FETCH-OOR-BELOW-LOG-START", {"FETCH-AT-LEO-EMPTY", "FETCH-OOR-ABOVE-LEO", "FETCH-MID-BATCH", "FETCH-HW-CAP"}),
    ("fetch.min_bytes_per_partition", FETCH, "accumulates_over_partitions or min_bytes_boundaries",
     "FETCH-MULTI-PARTITION", {"FETCH-MINBYTES-GE"}),
    ("fetch.mid_batch_next_batch", FETCH, "offset_positions or never_pass", "FETCH-MID-BATCH",
     {"FETCH-AT-LEO-EMPTY", "FETCH-OOR-ABOVE-LEO", "FETCH-HW-CAP"}),
    ("fetch.min_bytes_uncapped", FETCH, "min_bytes_capped or min_bytes_boundaries", "FETCH-MINBYTES-PARTITION-CAP",
     {"FETCH-MINBYTES-GE"}),
    # group: every rebalance rule, each with a neighbour that must still pass
    ("group.describe_completing_as_stable", REBALANCE, "state_transitions or static_member_rejoins", "GROUP-STATES",
     {"GROUP-STATIC-REJOIN"}),
    ("group.initial_delay_quarter", REBALANCE, "initial_rebalance_delay or state_transitions", "GROUP-INITIAL-DELAY",
     {"GROUP-STATES"}),
    ("group.no_member_id_required", REBALANCE, "member_id_required or join_starts", "GROUP-MEMBER-ID-REQUIRED",
     {"GROUP-JOIN-REBALANCE"}),
    ("group.session_bounds_exclusive", REBALANCE, "invalid_session_timeout or member_id_required",
     "GROUP-INVALID-SESSION-TIMEOUT", {"GROUP-MEMBER-ID-REQUIRED"}),
    ("group.session_timeout_unchecked", REBALANCE, "invalid_session_timeout or member_id_required",
     "GROUP-INVALID-SESSION-TIMEOUT", {"GROUP-MEMBER-ID-REQUIRED"}),
    ("group.followers_get_members", REBALANCE, "join_starts or leave_starts", "GROUP-JOIN-REBALANCE",
     {"GROUP-LEAVE-REBALANCE"}),
    ("group.no_rebalance_signal", REBALANCE, "heartbeat_in_preparing or heartbeat_in_completing",
     "GROUP-HEARTBEAT-REBALANCE-IN-PROGRESS", {"GROUP-HEARTBEAT-COMPLETING"}),
    ("group.no_rebalance_signal", REBALANCE, "leave_starts or session_timeout_removes", "GROUP-LEAVE-REBALANCE",
     {"GROUP-SESSION-TIMEOUT"}),
    ("group.no_rebalance_signal", REBALANCE, "cooperative", "GROUP-COOPERATIVE-INCREMENTAL", set()),
    ("group.heartbeat_completing_rebalancing", REBALANCE, "heartbeat_in_completing or heartbeat_in_preparing",
     "GROUP-HEARTBEAT-COMPLETING", {"GROUP-HEARTBEAT-REBALANCE-IN-PROGRESS"}),
    ("group.sync_in_preparing_ok", REBALANCE, "sync_in_preparing or leader_never_syncs",
     "GROUP-SYNC-REBALANCE-IN-PROGRESS", {"GROUP-SYNC-LEADER-GONE"}),
    ("group.commit_in_completing_ok", REBALANCE, "commit_in_completing or commit_in_preparing",
     "OFFSET-COMMIT-COMPLETING", {"OFFSET-COMMIT-PREPARING"}),
    ("group.commit_in_preparing_refused", REBALANCE, "commit_in_preparing or commit_in_completing",
     "OFFSET-COMMIT-PREPARING", {"OFFSET-COMMIT-COMPLETING"}),
    ("group.ignore_generation", REBALANCE, "stale_generation or unknown_member", "GROUP-ILLEGAL-GENERATION",
     {"GROUP-UNKNOWN-MEMBER"}),
    ("offsets.accept_stale_generation", REBALANCE, "stale_generation and commit or unknown_member",
     "GROUP-ILLEGAL-GENERATION", {"GROUP-UNKNOWN-MEMBER"}),
    ("group.sync_unknown_member_ok", REBALANCE, "unknown_member or stale_generation", "GROUP-UNKNOWN-MEMBER",
     {"GROUP-ILLEGAL-GENERATION"}),
    ("group.leave_no_rebalance", REBALANCE, "leave_starts or state_transitions", "GROUP-LEAVE-REBALANCE",
     {"GROUP-STATES"}),
    ("group.session_expires_early", REBALANCE, "session_timeout_removes or returns_after", "GROUP-SESSION-TIMEOUT",
     {"GROUP-EXPIRED-REJOIN"}),
    ("group.static_rejoin_rebalances", REBALANCE, "static", "GROUP-STATIC-REJOIN", {"GROUP-STATIC-FENCED"}),
    ("group.fenced_as_unknown", REBALANCE, "static", "GROUP-STATIC-FENCED", {"GROUP-STATIC-REJOIN"}),
    ("group.fence_on_metadata_change", REBALANCE, "cooperative or static_member_rejoins",
     "GROUP-COOPERATIVE-INCREMENTAL", {"GROUP-STATIC-REJOIN"}),
    ("group.join_waits_session", REBALANCE, "shorter_timeout or session_timeout_removes", "GROUP-REBALANCE-TIMEOUT",
     {"GROUP-SESSION-TIMEOUT"}),
    ("group.owed_sync_never_expires", REBALANCE, "leader_never_syncs or session_timeout_removes",
     "GROUP-SYNC-LEADER-GONE", {"GROUP-SESSION-TIMEOUT"}),
    ("group.owed_sync_never_expires", REBALANCE, "disconnects_while_parked", "GROUP-DISCONNECT-RECOVERS", set()),
    ("group.abandoned_leader_kept", REBALANCE, "leader_abandons or disconnects_while_parked", "GROUP-JOIN-ABANDONED",
     {"GROUP-DISCONNECT-RECOVERS"}),
    ("group.expired_member_zombie", REBALANCE, "returns_after or session_timeout_removes", "GROUP-EXPIRED-REJOIN",
     {"GROUP-SESSION-TIMEOUT"}),
    ("group.leader_member_list_capped", REBALANCE, "many_members or join_starts", "GROUP-MANY-MEMBERS",
     {"GROUP-JOIN-REBALANCE"}),
    ("group.left_out_member_refused", REBALANCE, "its_assignment or many_members or leave_starts", "GROUP-SYNC-ASSIGNMENT",
     {"GROUP-MANY-MEMBERS", "GROUP-LEAVE-REBALANCE"}),
    # produce: idempotent producers (the failover check on a fresh 3-broker cluster)
    ("init_producer_id.bump_epoch", PRODUCE, "init_producer_id or recent_batch", "INIT-PRODUCER-ID-IDEMPOTENT",
     {"PRODUCE-IDEMPOTENT-DUPLICATE"}),
    ("produce.duplicate_window_one", PRODUCE, "recent_batch or init_producer_id", "PRODUCE-IDEMPOTENT-DUPLICATE",
     {"INIT-PRODUCER-ID-IDEMPOTENT"}),
    ("produce.producer_state_not_loaded", PRODUCE, "after_failover or recent_batch", "PRODUCE-IDEMPOTENT-FAILOVER",
     {"PRODUCE-IDEMPOTENT-DUPLICATE"}),
    ("replication.truncation_forgets_producers", PRODUCE, "after_truncation or recent_batch",
     "PRODUCE-IDEMPOTENT-TRUNCATION", {"PRODUCE-IDEMPOTENT-DUPLICATE"}),
    # transactions: each switch against its rule's check and a neighbour that must still pass (the last two on a
    # fresh 3-broker reference cluster)
    ("txn.no_aborted_list", TXN, "never_read_committed or commit_visible", "TXN-READ-COMMITTED-ABORTED",
     {"TXN-COMMIT-VISIBLE"}),
    # (the neighbour of txn.lso_is_hw reads nothing before waiting for LSO == HW, which that switch makes instant)
    ("txn.lso_is_hw", TXN, "open_transaction_not or not_in_transaction", "TXN-READ-COMMITTED-OPEN",
     {"TXN-VERIFY-PARTITION"}),
    ("txn.lso_is_hw", TXN, "last_stable_offset or not_in_transaction", "TXN-LSO", {"TXN-VERIFY-PARTITION"}),
    ("txn.commit_first_partition_only", TXN, "commit_visible or never_read_committed", "TXN-COMMIT-VISIBLE",
     {"TXN-READ-COMMITTED-ABORTED"}),
    ("txn.abort_as_commit", TXN, "abort_invisible or commit_visible", "TXN-ABORT-INVISIBLE", {"TXN-COMMIT-VISIBLE"}),
    ("txn.offsets_eager", TXN, "offsets_visible_at_commit or commit_visible", "TXN-OFFSETS-AT-COMMIT",
     {"TXN-COMMIT-VISIBLE"}),
    ("txn.ignore_require_stable", TXN, "require_stable or offsets_visible_at_commit", "TXN-REQUIRE-STABLE",
     {"TXN-OFFSETS-AT-COMMIT"}),
    ("txn.no_fencing", TXN, "fenced_producer or commit_visible", "TXN-FENCING", {"TXN-COMMIT-VISIBLE"}),
    ("txn.no_timeout", TXN, "times_out or commit_visible", "TXN-TIMEOUT-ABORTS", {"TXN-COMMIT-VISIBLE"}),
    ("txn.no_partition_verification", TXN, "not_in_transaction or commit_visible", "TXN-VERIFY-PARTITION",
     {"TXN-COMMIT-VISIBLE"}),
    # transaction version 2 (KIP-890 part 2; the epoch and retry checks add their partitions through Produce v12)
    # (its TV2 markers keep the producer's epoch, which a leader refuses while the transaction is open, KIP-1228: the
    # TV2 rules' commits never become visible, so the neighbour is a classic-protocol rule)
    ("txn.no_epoch_bump", TXN, "epoch_bumps or commit_visible", "TXN-TV2-EPOCH-BUMP", {"TXN-COMMIT-VISIBLE"}),
    ("txn.tv2_no_retry", TXN, "retried_end or epoch_bumps", "TXN-TV2-RETRY", {"TXN-TV2-EPOCH-BUMP"}),
    ("txn.no_implicit_add", TXN, "adds_its_partition or commit_visible", "TXN-TV2-IMPLICIT-ADD",
     {"TXN-COMMIT-VISIBLE"}),
    ("txn.no_concurrent_check", TXN, "concurrent_transactions_while_markers_pending", "TXN-CONCURRENT", set()),
    ("txn.markers_leader_only", TXN, "leader_failover", "TXN-MARKERS-FAILOVER", set()),
    # TxnOffsetCommit's errors and the admin views of transactions (issue 24, items 8 and 9)
    ("txn.offset_commit_group_not_found", TXN, "offset_commit_unknown_group or transaction_before_group",
     "TXN-OFFSET-COMMIT-UNKNOWN-GROUP", {"TXN-OFFSET-COMMIT-PRECEDENCE"}),
    ("txn.offset_commit_group_first", TXN, "transaction_before_group or offset_commit_unknown_group",
     "TXN-OFFSET-COMMIT-PRECEDENCE", {"TXN-OFFSET-COMMIT-UNKNOWN-GROUP"}),
    ("txn.list_duration_ongoing_only", TXN, "list_transactions_filters or describe_producers",
     "TXN-LIST-FILTERS", {"TXN-DESCRIBE-PRODUCERS"}),
    ("txn.describe_producers_no_txn_start", TXN, "describe_producers or list_transactions_filters",
     "TXN-DESCRIBE-PRODUCERS", {"TXN-LIST-FILTERS"}),
    # the partition leader's side (issue 24): Produce's transactional checks, marker epochs, LSO vs log start,
    # the aborted index, a TV2 producer's first sequence
    ("txn.produce_txn_checks_off", TXN, "no_hanging or commit_visible", "TXN-NO-HANGING", {"TXN-COMMIT-VISIBLE"}),
    ("txn.tv2_marker_epoch_as_tv1", TXN, "stale_marker or epoch_bumps", "TXN-MARKER-EPOCH",
     {"TXN-TV2-EPOCH-BUMP"}),
    ("txn.lso_below_log_start", TXN, "lso_not_below or last_stable_offset", "TXN-LSO-LOG-START", {"TXN-LSO"}),
    ("txn.abort_index_every_marker", TXN, "aborted_list_only or never_read_committed", "TXN-ABORTED-LIST-WROTE",
     {"TXN-READ-COMMITTED-ABORTED"}),
    ("txn.tv2_any_first_sequence", TXN, "first_sequence_must or adds_its_partition", "TXN-TV2-FIRST-SEQUENCE",
     {"TXN-TV2-IMPLICIT-ADD"}),
    ("txn.coordinator_epoch_unchecked", TXN, "zombie_coordinator or stale_marker", "TXN-MARKER-COORDINATOR-EPOCH",
     {"TXN-MARKER-EPOCH"}),
    # the coordinator's transitions (issue 24): one at a time, pending while markers are written, completion retried
    ("txn.timeout_abort_unchecked", TXN, "timeout_boundary", "TXN-TIMEOUT-RACE", set()),
    ("txn.tv2_timeout_double_bump", TXN, "tv2_timeout_abort_epoch", "TXN-TV2-TIMEOUT-EPOCH", set()),
    ("txn.markers_not_pending", TXN, "end_and_init_while_markers_pending", "TXN-CONCURRENT-END", set()),
    ("txn.complete_gives_up", TXN, "complete_after", "TXN-COMPLETE-LIVENESS", set()),
    # KIP-848 consumer groups (issue 26): each switch against its rule's check and a neighbour that must still pass
    ("consumer.join_answer_no_assignment", CGP, "join_gets or unsupported_assignor", "CGP-JOIN-ASSIGNMENT",
     {"CGP-UNSUPPORTED-ASSIGNOR"}),
    ("consumer.assign_before_revoke", CGP, "revoke_before_assign or test_leave", "CGP-REVOKE-BEFORE-ASSIGN",
     {"CGP-LEAVE"}),
    ("consumer.accept_any_epoch", CGP, "fenced_member_epoch or test_leave", "CGP-FENCED-EPOCH", {"CGP-LEAVE"}),
    ("consumer.session_never_expires", CGP, "session_expiry or test_leave", "CGP-SESSION-EXPIRY", {"CGP-LEAVE"}),
    ("consumer.unrevoked_member_kept", CGP, "vanishes_mid or session_expiry", "CGP-VANISH-MID-RECONCILIATION",
     {"CGP-SESSION-EXPIRY"}),
    ("consumer.session_expires_early", CGP, "session_expiry or test_leave", "CGP-SESSION-EXPIRY", {"CGP-LEAVE"}),
    ("consumer.leave_no_rebalance", CGP, "test_leave or join_gets", "CGP-LEAVE", {"CGP-JOIN-ASSIGNMENT"}),
    ("consumer.group_epoch_reset_on_leave", CGP, "epochs_only_grow or fenced_member_epoch", "CGP-EPOCHS-GROW",
     {"CGP-FENCED-EPOCH"}),
    ("consumer.static_replace_live", CGP, "static_instance or unsupported_assignor", "CGP-STATIC-UNRELEASED",
     {"CGP-UNSUPPORTED-ASSIGNOR"}),
    ("consumer.any_assignor", CGP, "unsupported_assignor or static_instance", "CGP-UNSUPPORTED-ASSIGNOR",
     {"CGP-STATIC-UNRELEASED"}),
    ("consumer.no_rebalance_timeout", CGP, "rebalance_timeout or test_leave", "CGP-REBALANCE-TIMEOUT", {"CGP-LEAVE"}),
    ("consumer.metadata_not_refreshed", CGP, "topic_created or join_gets", "CGP-TOPIC-CREATED",
     {"CGP-JOIN-ASSIGNMENT"}),
    ("consumer.static_leave_is_leave", CGP, "static_rejoin or static_instance", "CGP-STATIC-REJOIN",
     {"CGP-STATIC-UNRELEASED"}),
    ("consumer.regex_search", CGP, "regex or topic_created", "CGP-REGEX", {"CGP-TOPIC-CREATED"}),
    ("consumer.commit_ignores_member_epoch", CGP, "offset_commit_member_epoch or join_gets", "CGP-OFFSET-STALE-EPOCH",
     {"CGP-JOIN-ASSIGNMENT"}),
    # the controller quorum (KIP-595), on 3 brokers beside 3 dedicated controllers
    ("raft.no_fetch_timeout", QUORUM, "after_kill or names_one_leader", "QUORUM-FAILOVER-KILL", {"QUORUM-DESCRIBE"}),
    ("raft.no_fetch_timeout", QUORUM, "after_pause", "QUORUM-FAILOVER-PAUSE", set()),
    ("raft.no_fetch_timeout", QUORUM, "metadata_goes_on", "QUORUM-METADATA-AFTER-FAILOVER", set()),
    ("quorum.no_activation_after_failover", QUORUM, "metadata_goes_on or names_one_leader",
     "QUORUM-METADATA-AFTER-FAILOVER", {"QUORUM-DESCRIBE"}),
    ("describe_quorum.no_observers", QUORUM, "names_one_leader or after_kill", "QUORUM-DESCRIBE",
     {"QUORUM-FAILOVER-KILL"}),
]


def test_faults_table_is_the_rule_switch_matrix() -> None:
    """The FAULTS rows and conformance.coverage.BREAKS (what the report shows) say the same thing, about real
    switches and declared rules; the count of rules with teeth only goes up."""
    from conformance.rules import RULES
    from conformance.suites import (  # noqa: F401  (declare)
        test_clients,
        test_elr,
        test_fetch,
        test_isr_hw,
        test_offsets,
        test_produce,
        test_quorum,
        test_rebalance,
        test_topics,
        test_transactions,
    )
    __import__("conformance.suites.test_consumer_protocol")    # declares the CGP rules (KIP-848)

    assert set(BREAKS) <= set(SWITCHES), f"unknown switches: {set(BREAKS) - set(SWITCHES)}"
    rows = {(f, d) for f, _s, _k, d, _p in FAULTS}
    declared = {(f, r) for f, rs in BREAKS.items() for r in rs}
    assert rows == declared, f"rows without BREAKS entry: {rows - declared}; BREAKS without row: {declared - rows}"
    assert {r for _f, r in declared} <= set(RULES)
    covered = {r for r, sw in switches_by_rule(RULES).items() if sw}
    assert covered == set(RULES), f"rules no switch breaks: {sorted(set(RULES) - covered)}"


def test_isr_hw_suite_passes_on_the_reference_cluster(tmp_path: Path) -> None:
    """Every ISR/HW rule runs (none skipped) and passes: the replication rules on fresh 3-broker clusters."""
    doc = run_suites(tmp_path, [ISR_HW])
    outcomes = {c["nodeid"].rsplit("::", 1)[-1]: (c["outcome"], c["message"]) for c in doc["checks"]}
    assert all(o == "pass" for o, _ in outcomes.values()), outcomes
    declared = {r for r, meta in doc["rules"].items() if meta["suite"] == "isr_hw"}
    assert declared == set(by_rule(doc)) and len(declared) == 18, declared


def test_elr_suite_passes_on_the_reference_cluster(tmp_path: Path) -> None:
    """Every ELR rule runs (none skipped: the replication checks get a fresh 3-broker cluster) and passes."""
    doc = run_suites(tmp_path, [ELR], name="elr")
    outcomes = {c["nodeid"].rsplit("::", 1)[-1]: (c["outcome"], c["message"]) for c in doc["checks"]}
    assert all(o == "pass" for o, _ in outcomes.values()), outcomes
    declared = {r for r, meta in doc["rules"].items() if meta["suite"] == "elr"}
    assert declared == set(by_rule(doc)) and len(declared) == 4, declared


def test_clients_suite_passes_against_reference(tmp_path: Path) -> None:
    """Every clients check runs (none skipped: the reference serves every codec, DeleteRecords) and passes, within
    a minute; each record a check produced is in the history."""
    doc = run_suites(tmp_path, [CLIENTS], name="clients")
    bad = [(c["nodeid"], c["outcome"], c["message"]) for c in doc["checks"] if c["outcome"] != "pass"]
    assert not bad, f"the reference broker must pass every clients check:\n{json.dumps(bad, indent=1)}"
    declared = {r for r, meta in doc["rules"].items() if meta["suite"] == "clients"}
    assert declared == set(by_rule(doc)) and len(declared) == 4, declared
    assert len(doc["checks"]) >= 20, len(doc["checks"])
    (hist,) = read_history(doc["history"])
    assert {"send", "poll", "assign", "commit"} <= {op["f"] for op in hist.ops}
    assert doc["duration_s"] < 60, f"the clients suite took {doc['duration_s']} s against the reference broker"


def test_produce_suite_passes_on_the_reference(tmp_path: Path) -> None:
    """Every produce rule runs (none skipped: the failover check gets a fresh 3-broker cluster) and passes."""
    doc = run_suites(tmp_path, [PRODUCE], name="produce")
    outcomes = {c["nodeid"].rsplit("::", 1)[-1]: (c["outcome"], c["message"]) for c in doc["checks"]}
    assert all(o == "pass" for o, _ in outcomes.values()), outcomes
    declared = {r for r, meta in doc["rules"].items() if meta["suite"] == "produce"}
    assert declared == set(by_rule(doc)) and len(declared) == 4, declared
    assert doc["duration_s"] < 120, f"the produce suite took {doc['duration_s']} s against the reference broker"


def test_transactions_suite_passes_on_the_reference(tmp_path: Path) -> None:
    """Every transactions rule runs (none skipped: the concurrent-transactions, failover and completion-liveness
    checks get a 3-broker cluster) and passes."""
    doc = run_suites(tmp_path, [TXN], name="transactions")
    outcomes = {c["nodeid"].rsplit("::", 1)[-1]: (c["outcome"], c["message"]) for c in doc["checks"]}
    assert all(o == "pass" for o, _ in outcomes.values()), outcomes
    declared = {r for r, meta in doc["rules"].items() if meta["suite"] == "transactions"}
    assert declared == set(by_rule(doc)) and len(declared) == 29, declared
    # a bound against a hang, not a speed target: 29 rules incl. a 16-round timeout stress check and two completion
    # liveness checks that kill and pause brokers (105 s at load 20 on 2 cores)
    assert doc["duration_s"] < 300, f"the transactions suite took {doc['duration_s']} s against the reference broker"


def test_rebalance_suite_passes_on_the_reference(tmp_path: Path) -> None:
    """None diverge without switches: every rebalance rule runs (none skipped) and passes, in bounded wall time."""
    doc = run_suites(tmp_path, [REBALANCE])
    outcomes = {c["nodeid"].rsplit("::", 1)[-1]: (c["outcome"], c["message"]) for c in doc["checks"]}
    assert all(o == "pass" for o, _ in outcomes.values()), outcomes
    declared = {r for r, meta in doc["rules"].items() if meta["suite"] == "rebalance"}
    assert declared == set(by_rule(doc)) and len(declared) >= 25, declared ^ set(by_rule(doc))
    assert doc["duration_s"] < 90, f"the rebalance suite took {doc['duration_s']} s against the reference broker"


def test_consumer_protocol_suite_passes_on_the_reference(tmp_path: Path) -> None:
    """KIP-848 (issue 26): every consumer_protocol rule runs (none skipped) and passes, in bounded wall time."""
    doc = run_suites(tmp_path, [CGP])
    outcomes = {c["nodeid"].rsplit("::", 1)[-1]: (c["outcome"], c["message"]) for c in doc["checks"]}
    assert all(o == "pass" for o, _ in outcomes.values()), outcomes
    declared = {r for r, meta in doc["rules"].items() if meta["suite"] == "consumer_protocol"}
    assert declared == set(by_rule(doc)) and len(declared) >= 14, declared ^ set(by_rule(doc))
    assert doc["duration_s"] < 90, f"the consumer_protocol suite took {doc['duration_s']} s against the reference"


def _row_ids() -> list[str]:
    """``switch-RULE``, with ``-2``, ``-3`` for further rows of the same pair (pytest's own suffixes would differ)."""
    seen: dict[str, int] = {}
    out = []
    for f in FAULTS:
        base = f"{f[0]}-{f[3]}"
        seen[base] = seen.get(base, 0) + 1
        out.append(base if seen[base] == 1 else f"{base}-{seen[base]}")
    return out


ROW_IDS = _row_ids()
# The rows' child runs mostly wait on timers (max_wait, lag times, session timeouts), so a few run side by side;
# KCT_ROW_WORKERS=1 runs them one at a time.
ROW_WORKERS = int(os.environ.get("KCT_ROW_WORKERS", "3"))


def run_row(work: Path, fault: str, suite: str, select: str) -> tuple[dict, str]:
    """One row: the suite's selected checks with the switch on, and the HTML report of that run."""
    doc = run_suites(work, [suite], "-k", select, "--target-config", f"faults={fault}", *SUITE_CONFIG.get(suite, ()),
                     name=fault)
    out = work / "report"
    proc = subprocess.run([sys.executable, "-m", "reports", "conformance", str(work / f"{fault}.json"),
                           "--out", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return doc, (out / "index.html").read_text()


@pytest.fixture(scope="module")
def row_runs(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Start the child runs of every selected row at once (ROW_WORKERS at a time); each row's test waits for its
    own. Only the rows this session selected run."""
    wanted = {item.callspec.id for item in request.session.items
              if item.originalname == "test_fault_switch_shows_as_divergence" and hasattr(item, "callspec")}
    pool = ThreadPoolExecutor(max_workers=max(1, ROW_WORKERS))
    futures = {rid: pool.submit(run_row, tmp_path_factory.mktemp("row"), row[0], row[1], row[2])
               for rid, row in zip(ROW_IDS, FAULTS, strict=True) if rid in wanted}
    yield futures
    pool.shutdown(wait=True, cancel_futures=True)


@pytest.mark.parametrize(("fault", "suite", "select", "diverges", "still_pass"), FAULTS, ids=ROW_IDS)
def test_fault_switch_shows_as_divergence(row_runs: dict, request: pytest.FixtureRequest, fault: str, suite: str,
                                          select: str, diverges: str, still_pass: set[str]) -> None:
    doc, page = row_runs[request.node.callspec.id].result(timeout=600)
    rules = by_rule(doc)
    assert doc["target"]["config"]["faults"] == [fault]
    assert "divergence" in rules.get(diverges, set()), (
        f"{fault} breaks {diverges}, but its checks reported {rules.get(diverges)}:\n{doc['_stdout'][-2000:]}")
    assert not any(c["outcome"] == "error" for c in doc["checks"]), "a broken rule must read as divergence, not error"
    for r in still_pass:
        assert rules.get(r) == {"pass"}, f"{fault} should not affect {r}: {rules.get(r)}"
    # Exactly the switch's rules diverge among the selected checks (conformance.coverage.BREAKS): every diverging
    # check cites one of them (a check citing two rules, e.g. ISR-SHRINK-LAG + ISR-EXPAND, diverges as a whole).
    wrong = [(c["name"], c["rules"]) for c in doc["checks"]
             if c["outcome"] == "divergence" and not set(c["rules"]) & set(BREAKS[fault])]
    assert not wrong, f"{fault} breaks {BREAKS[fault]} only, but these checks diverged too: {wrong}"
    assert set(BREAKS[fault]) & set(rules) <= {r for r, o in rules.items() if "divergence" in o}
    div = next(c for c in doc["checks"] if c["outcome"] == "divergence" and diverges in c["rules"])
    assert div["message"] and div["evidence"].get("exchanges"), "a divergence carries its message and evidence"

    # The HTML report shows the divergence for that rule, with its evidence.
    assert f'id="divergence-0-{diverges}"' in page, "the report links the rule's cell to its divergence"
    assert f"faults: {fault}" in page
    assert 'id="rule-coverage"' in page and f"<code>{fault}</code>" in page, "the report shows rule coverage"
    assert div["message"].splitlines()[0][:60] in html.unescape(page)
