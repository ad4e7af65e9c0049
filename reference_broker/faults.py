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
    "fetch.read_past_hw": "consumers read up to the log end offset instead of the high watermark — breaks "
                          "FETCH-HW-CAP",
    "fetch.oor_as_empty": "fetch offsets beyond the log end answer empty instead of OFFSET_OUT_OF_RANGE",
    "offsets.accept_stale_generation": "OffsetCommit ignores the generation (Kafka: ILLEGAL_GENERATION)",
    "offsets.forget_on_restart": "committed offsets are not replayed when the broker restarts",
    "group.no_rebalance_signal": "Heartbeat answers NONE in PreparingRebalance (Kafka: REBALANCE_IN_PROGRESS) — "
                                 "breaks GROUP-HEARTBEAT-REBALANCE-IN-PROGRESS (and the rules whose members learn "
                                 "of a rebalance that way: GROUP-LEAVE-REBALANCE, GROUP-COOPERATIVE-INCREMENTAL)",
    "produce.ignore_min_insync": "acks=all ignores min.insync.replicas (Kafka: NOT_ENOUGH_REPLICAS when the ISR is "
                                 "smaller, Partition.appendRecordsToLeader)",
    "list_offsets.latest_is_leo": "ListOffsets LATEST answers the log end offset instead of the high watermark (seen "
                                  "while a follower lags) — breaks LIST-OFFSETS-LATEST",
    "list_offsets.earliest_is_zero": "ListOffsets EARLIEST answers 0, ignoring the log start offset DeleteRecords "
                                     "moved — breaks LIST-OFFSETS-EARLIEST",
    "list_offsets.timestamp_exclusive": "ListOffsets by timestamp finds the first record with timestamp > it "
                                        "(Kafka: >=) — breaks LIST-OFFSETS-TIMESTAMP",
    "fetch.zero_wait_parks": "a fetch with max_wait_ms=0 that cannot reach min_bytes parks for 2 s (Kafka: "
                             "answers at once) — breaks FETCH-MAXWAIT-ZERO",
    "group.describe_unknown_empty": "DescribeGroups of an unknown group answers state Empty (Kafka: Dead) — breaks "
                                    "GROUP-DESCRIBE-DEAD",
    # eligible leader replicas (ELR suite, KIP-966)
    "elr.disabled": "the controller ignores eligible.leader.replicas.version: no ELR, the ISR keeps its last member "
                    "(PartitionChangeBuilder without KIP-966) — breaks ELR-SHRINK-BELOW-MIN-ISR (and "
                    "ELR-CLEAN-ELECTION, whose first step expects the ELR)",
    "elr.no_election_from_elr": "with the ISR empty, an eligible leader replica is not a valid leader (Kafka: "
                                "PartitionChangeBuilder.isValidNewLeader accepts ELR members when the ISR is empty) "
                                "— breaks ELR-CLEAN-ELECTION",
    "features.downgrade_as_upgrade": "UpdateFeatures lowers a finalized level with upgrade type UPGRADE (Kafka: "
                                     "INVALID_UPDATE_VERSION, FeatureControlManager.updateFeature) — breaks "
                                     "FEATURES-UPDATE",
    "describe_topic_partitions.no_limit": "DescribeTopicPartitions ignores response_partition_limit and never sets "
                                          "next_cursor — breaks DTP-PAGINATION",
    # replication (ISR-HW suite)
    "isr.hw_is_leader_leo": "the leader's HW is its own LEO, ignoring in-sync followers (Kafka: min LEO over the "
                            "ISR, Partition.maybeIncrementLeaderHW) — breaks HW-MIN-LEO-ISR",
    "isr.never_shrink": "a lagging follower is never removed from the ISR — breaks ISR-SHRINK-LAG",
    "isr.shrink_early": "followers leave the ISR after a quarter of replica.lag.time.max.ms — breaks ISR-SHRINK-LAG",
    "isr.never_expand": "a follower that caught up is never added back to the ISR — breaks ISR-EXPAND",
    "isr.hw_ignores_min_isr": "the HW advances while the ISR is below min.insync.replicas (before KAFKA-15583) — "
                              "breaks HW-HOLD-BELOW-MIN-ISR",
    "fetch.hw_off_by_one": "Fetch reports high_watermark - 1 (the last committed offset instead of the next one) — "
                           "breaks HW-CONSISTENT-VIEWS",
    "fetch.hw_is_read_end": "Fetch reports as high_watermark the end of the batches it returned, so the HW seen "
                            "depends on the fetch offset and max bytes and can go back — breaks HW-MONOTONIC",
    "produce.acks_all_ok_after_shrink": "an acks=all produce whose ISR shrank below min.insync.replicas after the "
                                        "append answers NONE (Kafka: NOT_ENOUGH_REPLICAS_AFTER_APPEND or a "
                                        "timeout) — breaks ACKS-ALL-AFTER-APPEND",
    "replication.truncate_to_hw": "a follower that becomes leader first truncates its log to its own high "
                                  "watermark (the pre-KIP-101 rule) — breaks HW-FAILOVER",
    "replication.ignore_diverging_epoch": "followers ignore diverging_epoch and never truncate (Kafka: truncate by "
                                          "leader epoch, KIP-101/KIP-320) — breaks TRUNCATE-BY-EPOCH",
    "replication.record_diverging_fetch": "the leader records a follower's fetch offset as its position even when "
                                          "the fetch is answered with a diverging epoch (Kafka: only without one, "
                                          "Partition.fetchRecords) — breaks HW-DIVERGING-FOLLOWER",
    "replication.keep_epoch_at_log_end": "a follower's truncation at its log end keeps the epoch-cache entry there "
                                         "(an epoch it led without writing), so its fetches diverge forever "
                                         "(Kafka: UnifiedLog.truncateTo always truncates the cache from the end) — "
                                         "breaks ISR-REJOIN-AFTER-EMPTY-EPOCH",
    "replication.cap_start_at_log_end": "a follower whose log ends below the leader's log start moves its own log "
                                        "start only up to its log end and sets its HW to the leader's log start, "
                                        "so it fetches out of range forever (Kafka: truncateFullyAndStartAt the "
                                        "leader's log start) — breaks ISR-REJOIN-BEHIND-LOG-START",
    "fetch.last_fetched_epoch_unchecked": "a consumer Fetch's last_fetched_epoch is ignored and a follower's that "
                                          "the leader cannot place gets diverging epoch (-1, -1) (Kafka: checked "
                                          "for every fetch, UNDEFINED → OFFSET_OUT_OF_RANGE, Partition.readRecords) "
                                          "— breaks FETCH-LAST-FETCHED-EPOCH",
    "isr.min_isr_not_capped": "min.insync.replicas larger than the replication factor is taken as it is, so "
                              "acks=all to such a topic is always NOT_ENOUGH_REPLICAS (Kafka >= 3.7: "
                              "min(min.insync.replicas, replication factor), Partition.effectiveMinIsr) — breaks "
                              "ACKS-ALL-MIN-ISR-ABOVE-RF",
    "list_offsets.no_offset_not_available": "a fresh leader whose HW is still below its epoch start answers "
                                            "ListOffsets LATEST with that HW (Kafka: OFFSET_NOT_AVAILABLE, "
                                            "Partition.fetchOffsetForTimestamp) — breaks "
                                            "LIST-OFFSETS-NOT-AVAILABLE",
    "isr.idle_follower_lags": "a follower at the leader's log end that has not fetched for replica.lag.time.max.ms "
                              "leaves the ISR although no record was written meanwhile (Kafka: caught up, "
                              "ReplicaState.isCaughtUp) — breaks ISR-IDLE-FOLLOWER",
    # clients (conformance/suites/test_clients.py; record rewriting in reference_broker/record_faults.py)
    "fetch.drop_headers": "fetched batches are re-encoded without their record headers (KIP-82) — breaks "
                          "FETCH-RECORDS-AS-PRODUCED",
    "fetch.swap_producer_batches": "two adjacent batches of different idempotent producers swap places in a fetch "
                                   "answer, offsets restamped dense (records no longer at the offsets their "
                                   "producers were told) — breaks FETCH-RECORDS-AS-PRODUCED",
    "fetch.compressed_base_is_last": "a compressed batch carries its last offset as its base offset (the magic v0/v1 "
                                     "wrapper rule applied to v2) — breaks FETCH-RECORDS-AS-PRODUCED and "
                                     "CONSUMER-MID-BATCH (its seek reads a compressed batch)",
    "fetch.mid_batch_next_batch": "a fetch offset inside a batch gets the next batch instead of the one containing "
                                  "it (Kafka: LogSegment.read starts at the containing batch) — breaks "
                                  "FETCH-MID-BATCH, CONSUMER-MID-BATCH and RESET-BATCHED (earliest from a mid-batch "
                                  "log start)",
    "produce.ignore_max_message_bytes": "batches above max.message.bytes are appended (Kafka: MESSAGE_TOO_LARGE) — "
                                        "breaks PRODUCE-MAX-MESSAGE-BYTES",
    "list_offsets.latest_is_last_batch_base": "ListOffsets LATEST answers the base offset of the last batch (Kafka: "
                                              "the high watermark, after its last record) — breaks RESET-BATCHED",
    "offsets.uncommitted_is_zero": "OffsetFetch answers offset 0 for a partition never committed (Kafka: -1, no "
                                   "offset, so auto.offset.reset applies) — breaks RESET-BATCHED, RESET-NONE, "
                                   "RESET-LATEST, OFFSETS-COMMIT-ROUNDTRIP",
    # offsets (offsets suite: commit/fetch, ListOffsets, what consumers do with the answers)
    "offsets.keep_first_commit": "a later OffsetCommit for a partition does not replace the stored offset (Kafka: "
                                 "the last commit wins) — breaks OFFSETS-COMMIT-ROUNDTRIP, CONSUMER-RESUME-COMMITTED",
    "offsets.accept_unknown_member": "OffsetCommit from a member id the group does not know (or generation-less to "
                                     "a non-empty group) is stored (Kafka: UNKNOWN_MEMBER_ID) — breaks "
                                     "OFFSETS-COMMIT-UNKNOWN-MEMBER",
    "offsets.metadata_max_exclusive": "OffsetCommit metadata of exactly offset.metadata.max.bytes is "
                                      "OFFSET_METADATA_TOO_LARGE (Kafka: only longer) — breaks OFFSETS-METADATA-MAX",
    "offsets.drop_leader_epoch": "OffsetCommit stores leader epoch -1 whatever was committed — breaks "
                                 "OFFSETS-LEADER-EPOCH",
    "offsets.visible_before_committed": "OffsetFetch serves offsets as soon as they are appended to the offsets "
                                        "partition, before its HW passed them (Kafka: at the last committed "
                                        "offset, CoordinatorRuntime) — breaks OFFSETS-VISIBLE-WHEN-COMMITTED",
    "offsets.topic_rf_capped": "__consumer_offsets is created on the first FindCoordinator with min(offsets.topic."
                               "replication.factor, live brokers) replicas, so an early lookup leaves it under-"
                               "replicated for good (Kafka: the configured factor or not at all) — breaks "
                               "OFFSETS-TOPIC-REPLICATION-FACTOR",
    "metadata.all_topics_hide_internal": "Metadata for all topics leaves out internal topics (Kafka: listed, "
                                         "is_internal true) — breaks METADATA-ALL-TOPICS-INTERNAL",
    "configs.incremental_replaces": "IncrementalAlterConfigs replaces a topic's whole override set, as legacy "
                                    "AlterConfigs does (Kafka: only the named configs change, KIP-339) — breaks "
                                    "CONFIGS-INCREMENTAL-TOPIC",
    "configs.accept_invalid_value": "IncrementalAlterConfigs checks topic config names but not values (Kafka: "
                                    "LogConfig.validate, INVALID_CONFIG) — breaks CONFIGS-INVALID-REFUSED",
    "configs.validate_only_applies": "IncrementalAlterConfigs with validate_only writes the change (Kafka: checks "
                                     "only) — breaks CONFIGS-VALIDATE-ONLY",
    "partitions.no_increase_check": "CreatePartitions with a count not above the current one answers NONE and "
                                    "changes nothing (Kafka: INVALID_PARTITIONS) — breaks "
                                    "CREATE-PARTITIONS-INCREASE-ONLY",
    "partitions.new_leaderless": "CreatePartitions writes the new partitions without a leader (Kafka: the first "
                                 "live replica leads) — breaks CREATE-PARTITIONS-METADATA",
    "log_dirs.size_records": "DescribeLogDirs reports a partition's record count as its size (Kafka: the bytes "
                             "of its log) — breaks LOG-DIRS-SIZE",
    "topics.nine_configs_only": "CreateTopics refuses every topic config but nine (Kafka: every LogConfig name) "
                                "— breaks TOPIC-CONFIGS-KAFKA",
    "offsets.fetch_all_empty": "OffsetFetch with topics null answers no partitions (Kafka: every committed one) — "
                               "breaks OFFSETS-FETCH-ALL",
    "list_offsets.earliest_is_latest": "ListOffsets EARLIEST answers the high watermark, so auto.offset.reset="
                                       "earliest skips the log — breaks RESET-EARLIEST (and LIST-OFFSETS-EARLIEST)",
    "list_offsets.latest_minus_one": "ListOffsets LATEST answers the last record's offset (HW - 1), so auto.offset."
                                     "reset=latest re-reads it — breaks RESET-LATEST (and LIST-OFFSETS-LATEST)",
    "list_offsets.timestamp_batch_base": "ListOffsets by timestamp answers the base offset of the batch holding the "
                                         "record found (Kafka: the record's offset) — breaks LIST-OFFSETS-TIMESTAMP",
    "list_offsets.max_timestamp_batch_last": "ListOffsets MAX_TIMESTAMP answers the last offset of the batch with "
                                             "the largest timestamp (KAFKA-16310; Kafka 3.8+: the record's offset) "
                                             "— breaks LIST-OFFSETS-MAX-TIMESTAMP",
    "list_offsets.earliest_local_unknown": "ListOffsets EARLIEST_LOCAL (-4) answers offset -1 like an unknown "
                                           "timestamp (Kafka: the local log start) — breaks LIST-OFFSETS-EARLIEST-LOCAL",
    "list_offsets.latest_tiered_is_latest": "ListOffsets LATEST_TIERED (-5) answers the HW as if LATEST (Kafka "
                                            "without remote storage: -1) — breaks LIST-OFFSETS-LATEST-TIERED",
    # fetch (issue 12, teeth for the fetch suite; fetch.read_past_hw above breaks FETCH-HW-CAP)
    "fetch.ignore_partition_max_bytes": "a partition's read is capped by the remaining max_bytes only, ignoring "
                                        "partition_max_bytes — breaks FETCH-PARTITION-MAX-BYTES",
    "fetch.max_bytes_per_partition": "max_bytes is not shared: every partition may use all of it (Kafka: the "
                                     "budget shrinks by what earlier partitions returned) — breaks FETCH-MAX-BYTES",
    "fetch.no_min_one": "a first batch larger than the limits is not returned (Kafka: returned whole, KIP-74 "
                        "minOneMessage) — breaks FETCH-FIRST-BATCH-WHOLE",
    "fetch.expired_at_leo_oor": "a parked consumer fetch at the LEO of a non-empty log answers "
                                "OFFSET_OUT_OF_RANGE when max_wait expires (Kafka: empty, no error) — breaks "
                                "FETCH-AT-LEO-EMPTY",
    "fetch.serve_below_log_start": "a fetch below the log start offset reads from the log start, no error (Kafka: "
                                   "OFFSET_OUT_OF_RANGE) — breaks FETCH-OOR-BELOW-LOG-START",
    "fetch.min_bytes_per_partition": "min_bytes is compared with each partition's bytes, not their sum "
                                     "(DelayedFetch Case G sums) — breaks FETCH-MULTI-PARTITION",
    "fetch.min_bytes_uncapped": "a parked fetch counts every byte after its fetch offset toward min_bytes, not at "
                                "most partition_max_bytes per partition (DelayedFetch.tryComplete caps) — breaks "
                                "FETCH-MINBYTES-PARTITION-CAP",
    # produce (idempotent producers, conformance/suites/test_produce.py)
    "init_producer_id.bump_epoch": "InitProducerId without a transactional id that names the producer's current id "
                                   "and epoch answers the same id with the epoch bumped (Kafka: a new id, epoch 0) "
                                   "— breaks INIT-PRODUCER-ID-IDEMPOTENT",
    "produce.duplicate_window_one": "a retry is recognised as a duplicate only of the producer's last batch, not of "
                                    "its last five (Kafka: ProducerStateEntry keeps NUM_BATCHES_TO_RETAIN = 5) — "
                                    "breaks PRODUCE-IDEMPOTENT-DUPLICATE",
    "produce.producer_state_not_loaded": "a log opened at broker start has no idempotent producer state (no "
                                         "snapshot read, no log replay), so a restarted broker that becomes leader "
                                         "appends a retry again (Kafka: LogLoader rebuilds it) — breaks "
                                         "PRODUCE-IDEMPOTENT-FAILOVER",
    "replication.truncation_forgets_producers": "a log truncation (follower catching up after a failover) forgets "
                                                "every idempotent producer instead of rebuilding the state up to "
                                                "the truncation offset (UnifiedLog.truncateTo) — breaks "
                                                "PRODUCE-IDEMPOTENT-TRUNCATION",
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
    "group.abandoned_leader_kept": "a leader whose connection closes while its JoinGroup is parked stays in the "
                                   "group as its leader forever (no session or pending-sync expiry), so newcomers "
                                   "never get a Stable generation — breaks GROUP-JOIN-ABANDONED",
    "group.expired_member_zombie": "a member removed by session expiry still gets NONE for its Heartbeat "
                                   "(Kafka: UNKNOWN_MEMBER_ID) — breaks GROUP-EXPIRED-REJOIN",
    "group.leader_member_list_capped": "the leader's JoinGroup answer lists at most 16 members — breaks "
                                       "GROUP-MANY-MEMBERS",
    "group.left_out_member_refused": "a member the leader's assignment left out gets REBALANCE_IN_PROGRESS for its "
                                     "SyncGroup (Kafka: an empty assignment, no error) — breaks "
                                     "GROUP-SYNC-ASSIGNMENT",
    # transactions (conformance/suites/test_transactions.py; rule ids in /work/notes/TXN_SPEC.md)
    "txn.no_aborted_list": "read_committed Fetch answers aborted_transactions [] even when aborted transactions "
                           "overlap the records returned (Kafka: LocalLog.addAbortedTransactions lists them), so "
                           "consumers keep aborted records — breaks TXN-READ-COMMITTED-ABORTED",
    "txn.lso_is_hw": "the last stable offset is the HW, ignoring open transactions (Kafka: the first offset of the "
                     "earliest open transaction, UnifiedLog.lastStableOffset) — breaks TXN-LSO and "
                     "TXN-READ-COMMITTED-OPEN",
    "txn.commit_first_partition_only": "a committing transaction's COMMIT marker is written to its first partition "
                                       "only; the others get none and stay open (Kafka: every partition, "
                                       "TransactionMarkerChannelManager) — breaks TXN-COMMIT-VISIBLE",
    "txn.abort_as_commit": "EndTxn abort writes COMMIT markers (Kafka: ABORT, TransactionCoordinator."
                           "endTransaction) — breaks TXN-ABORT-INVISIBLE",
    "txn.offsets_eager": "TxnOffsetCommit offsets are applied at once, visible to OffsetFetch before the "
                         "transaction commits and kept when it aborts (Kafka: pending until the marker, "
                         "GroupMetadataManager / OffsetMetadataManager.replayEndTransactionMarker) — breaks "
                         "TXN-OFFSETS-AT-COMMIT",
    "txn.ignore_require_stable": "OffsetFetch with require_stable answers the committed offset while a "
                                 "transactional commit for the partition is pending (Kafka: UNSTABLE_OFFSET_COMMIT, "
                                 "KIP-447) — breaks TXN-REQUIRE-STABLE",
    "txn.no_fencing": "InitProducerId for a transactional id does not bump the epoch and the coordinator accepts "
                      "AddPartitionsToTxn / EndTxn of any epoch (Kafka: PRODUCER_FENCED, "
                      "TransactionCoordinator) — breaks TXN-FENCING",
    "txn.no_timeout": "transactions open longer than their transaction.timeout.ms are never aborted (Kafka: "
                      "TransactionCoordinator.abortTimedOutTransactions) — breaks TXN-TIMEOUT-ABORTS",
    "txn.no_concurrent_check": "InitProducerId and AddPartitionsToTxn proceed while the previous transaction's "
                               "markers are still being written (Kafka: CONCURRENT_TRANSACTIONS in PrepareCommit / "
                               "PrepareAbort) — breaks TXN-CONCURRENT",
    "txn.no_partition_verification": "a transactional produce to a partition not added to the transaction is "
                                     "appended (Kafka >= 3.6, KIP-890 part 1: INVALID_TXN_STATE for Produce "
                                     "v3-v10, ReplicaManager.appendRecords verification) — breaks "
                                     "TXN-VERIFY-PARTITION",
    "txn.no_epoch_bump": "EndTxn v5 (transaction version 2) keeps the producer epoch: the answer, the markers and "
                         "the next transaction use the same one (Kafka: epoch + 1 at every EndTxn, "
                         "TransactionMetadata.prepareAbortOrCommit with supportsEpochBump, KIP-890 part 2) — breaks "
                         "TXN-TV2-EPOCH-BUMP",
    "txn.tv2_no_retry": "a retried EndTxn v5 with the epoch before its bump is PRODUCER_FENCED (Kafka: answered as "
                        "the completed outcome, TransactionCoordinator.endTransaction retryOnEpochBump) — breaks "
                        "TXN-TV2-RETRY",
    "txn.no_implicit_add": "a transactional Produce v12 (or TxnOffsetCommit v5) to a partition not in the transaction "
                           "is appended but the partition is not added to it, so no marker ever ends it there "
                           "(Kafka: the leader adds it, AddPartitionsToTxnManager verifyOnly=false, KIP-890 part 2) "
                           "— breaks TXN-TV2-IMPLICIT-ADD",
    "txn.timeout_abort_unchecked": "the timeout abort of a transaction starts after its decision without re-checking "
                                   "the transaction or taking its pending state first, so an EndTxn handled "
                                   "meanwhile prepares its own end and both complete: COMMIT and ABORT markers "
                                   "for one transaction (Kafka: abortTimedOutTransactions checks "
                                   "pendingTransitionInProgress under the lock, prepareTransitionTo refuses a "
                                   "second transition) — breaks TXN-TIMEOUT-RACE",
    "txn.complete_gives_up": "CompleteCommit / CompleteAbort is tried once after the markers: if the transaction log "
                             "refuses it (below min ISR) the transaction stays PrepareCommit / PrepareAbort until "
                             "the coordinator moves (Kafka: retried until the log accepts it, "
                             "TransactionMarkerChannelManager.tryAppendToLog) — breaks TXN-COMPLETE-LIVENESS",
    "txn.markers_not_pending": "a transaction is not pending while its markers are written (only its state says "
                               "PrepareCommit / PrepareAbort): EndTxn of the other outcome answers "
                               "INVALID_TXN_STATE and InitProducerId with a stale producer epoch PRODUCER_FENCED "
                               "(Kafka: prepareComplete keeps a pending transition, so both are "
                               "CONCURRENT_TRANSACTIONS) — breaks TXN-CONCURRENT-END",
    "txn.tv2_timeout_double_bump": "the timeout abort of a transaction of transaction version 2 bumps the producer "
                                   "epoch twice (the fence's bump and the TV2 end's), CompleteAbort at epoch + 2 "
                                   "(Kafka 4.4.0: epoch + 1) — breaks TXN-TV2-TIMEOUT-EPOCH",
    "txn.markers_leader_only": "transaction markers take effect on the leader only: followers copy the control "
                               "batches but their producer state ignores them, so after a failover the new leader "
                               "still sees the transaction open (its LSO stuck below the committed records, aborted "
                               "ones missing from its aborted index) until a restart replays the log (Kafka: "
                               "markers replicate like any batch) — breaks TXN-MARKERS-FAILOVER",
    "txn.offset_commit_group_not_found": "TxnOffsetCommit with a generation for an unknown group answers "
                                         "GROUP_ID_NOT_FOUND (Kafka: ILLEGAL_GENERATION at every version, "
                                         "OffsetMetadataManager.validateTransactionalOffsetCommit) — breaks "
                                         "TXN-OFFSET-COMMIT-UNKNOWN-GROUP",
    "txn.offset_commit_group_first": "TxnOffsetCommit validates the group before verifying the producer's "
                                     "transaction, so a fenced producer committing for an unknown group hears "
                                     "ILLEGAL_GENERATION (Kafka: the transaction first, INVALID_PRODUCER_EPOCH, "
                                     "CoordinatorRuntime.scheduleTransactionalWriteOperation) — breaks "
                                     "TXN-OFFSET-COMMIT-PRECEDENCE",
    "txn.list_duration_ongoing_only": "ListTransactions' duration filter lists Ongoing transactions only (Kafka: "
                                      "any state but Dead with now - start > filter, an Empty id's start being -1, "
                                      "TransactionStateManager.listTransactionStates) — breaks TXN-LIST-FILTERS",
    "txn.describe_producers_no_txn_start": "DescribeProducers answers current_txn_start_offset -1 for a producer "
                                           "with an open transaction (Kafka: its first offset, ProducerStateEntry."
                                           "currentTxnFirstOffset) — breaks TXN-DESCRIBE-PRODUCERS",
    "txn.produce_txn_checks_off": "a Produce is appended without its transactional checks: transactional batches "
                                  "with no transactional id, batches of several transactional producer ids in one "
                                  "request, a non-transactional batch from a producer with an open transaction "
                                  "(Kafka: TRANSACTIONAL_ID_AUTHORIZATION_FAILED, INVALID_PRODUCER_ID_MAPPING, "
                                  "INVALID_TXN_STATE) — the orphan batch pins the LSO for ever; breaks "
                                  "TXN-NO-HANGING",
    "txn.tv2_marker_epoch_as_tv1": "a transaction version 2 marker (WriteTxnMarkers v2) is checked as a version 1 "
                                   "one, refused only when its epoch is lower (Kafka: an equal epoch is refused "
                                   "while a transaction is open, KIP-1228) — a delayed marker completes the next "
                                   "transaction; breaks TXN-MARKER-EPOCH",
    "txn.lso_below_log_start": "the LSO is not raised to the log start: after DeleteRecords past an open "
                               "transaction's first offset it stays below it (Kafka: "
                               "UnifiedLog.maybeIncrementFirstUnstableOffset) — breaks TXN-LSO-LOG-START",
    "txn.abort_index_every_marker": "every ABORT marker goes to the aborted transaction index, also for a producer "
                                    "that wrote nothing to the partition (Kafka: only a transaction with a first "
                                    "offset there, ProducerAppendInfo.appendEndTxnMarker) — breaks "
                                    "TXN-ABORTED-LIST-WROTE",
    "txn.tv2_any_first_sequence": "a transaction version 2 producer may start at any sequence on a partition where "
                                  "it has no state (Kafka 4.4: OUT_OF_ORDER_SEQUENCE_NUMBER unless 0, "
                                  "ProducerAppendInfo.checkSequence with a TV2 verification entry) — breaks "
                                  "TXN-TV2-FIRST-SEQUENCE",
    # chaos checkers (reports/metadata.py): the metadata workload's verdict must flip
    "metadata.create_ack_uncommitted": "the controller answers CreateTopics NONE for every fourth new topic (by "
                                       "name hash) without writing its records (Kafka: the answer waits for the "
                                       "commit, QuorumController) — the metadata workload's lost-create and "
                                       "topic-metadata linearizability",
    "metadata.serve_stale_view": "every third Metadata request naming topics is answered as by an older image: "
                                 "topics the broker already served are UNKNOWN_TOPIC_OR_PARTITION (Kafka: a KIP-631 "
                                 "broker applies the committed log in order, its view never goes back) — the "
                                 "metadata workload's stale-read",
    "txn.coordinator_epoch_unchecked": "a marker's coordinator epoch is not compared with the one of the producer's "
                                       "last marker (Kafka: TRANSACTION_COORDINATOR_FENCED when older, "
                                       "ProducerAppendInfo.checkCoordinatorEpoch), so a zombie coordinator's marker "
                                       "completes a transaction — breaks TXN-MARKER-COORDINATOR-EPOCH",
    # KIP-848 consumer groups (conformance/suites/test_consumer_protocol.py)
    "consumer.assign_before_revoke": "ConsumerGroupHeartbeat hands a member partitions another member has not revoked "
                                     "yet (Kafka: only once released, CurrentAssignmentBuilder) — breaks "
                                     "CGP-REVOKE-BEFORE-ASSIGN",
    "consumer.join_answer_no_assignment": "the answer to a join (ConsumerGroupHeartbeat epoch 0) carries no "
                                          "assignment (Kafka: a full request always gets it) — breaks "
                                          "CGP-JOIN-ASSIGNMENT",
    "consumer.accept_any_epoch": "ConsumerGroupHeartbeat accepts any member epoch (Kafka: FENCED_MEMBER_EPOCH unless "
                                 "it is the member's or its previous one) — breaks CGP-FENCED-EPOCH",
    "consumer.session_never_expires": "a consumer-group member's session lasts 4 × group.consumer.session.timeout.ms "
                                      "— breaks CGP-SESSION-EXPIRY",
    "consumer.unrevoked_member_kept": "a consumer-group member that owes revocations is never expired by its "
                                      "session, only by its rebalance timeout, so one that vanished mid-"
                                      "reconciliation holds its partitions — breaks CGP-VANISH-MID-RECONCILIATION",
    "consumer.session_expires_early": "a consumer-group member's session lasts half of "
                                      "group.consumer.session.timeout.ms — breaks CGP-SESSION-EXPIRY",
    "consumer.leave_no_rebalance": "a member leaving (epoch -1) is removed without bumping the group epoch, so its "
                                   "partitions stay unassigned — breaks CGP-LEAVE",
    "consumer.group_epoch_reset_on_leave": "a member leaving resets the group epoch to the member count, so member "
                                           "epochs go down — breaks CGP-EPOCHS-GROW",
    "consumer.static_replace_live": "a static member joining with the instance id of a live member replaces it "
                                    "(Kafka: UNRELEASED_INSTANCE_ID) — breaks CGP-STATIC-UNRELEASED",
    "consumer.no_rebalance_timeout": "a member that never revokes what it was asked to give up is never fenced "
                                     "(Kafka: fenced after its rebalance timeout) — breaks CGP-REBALANCE-TIMEOUT",
    "consumer.metadata_not_refreshed": "a consumer group's subscribed-topic metadata is recomputed only when a "
                                       "subscription changes, so a topic created later is never assigned — breaks "
                                       "CGP-TOPIC-CREATED",
    "consumer.static_leave_is_leave": "a static member leaving with epoch -2 is removed like epoch -1 (Kafka: its "
                                      "partitions stay reserved for the instance) — breaks CGP-STATIC-REJOIN",
    "consumer.regex_search": "a SubscribedTopicRegex matches topics containing a match anywhere in their name "
                             "(Kafka: the whole name, Pattern.matches) — breaks CGP-REGEX",
    "consumer.any_assignor": "ConsumerGroupHeartbeat accepts a server assignor it does not have (falls back to the "
                             "default; Kafka: UNSUPPORTED_ASSIGNOR) — breaks CGP-UNSUPPORTED-ASSIGNOR",
    "consumer.commit_ignores_member_epoch": "OffsetCommit / OffsetFetch v9 from a consumer-group member is accepted "
                                            "whatever member epoch it names (Kafka: STALE_MEMBER_EPOCH) — breaks "
                                            "CGP-OFFSET-STALE-EPOCH",
    # the controller quorum (KIP-595; tests/cluster/test_controller_quorum.py)
    "quorum.follower_acts_active": "a controller that is not the Raft leader acts as the active controller: it "
                                   "answers broker and admin requests and applies their records to its own image "
                                   "without Raft (Kafka: NOT_CONTROLLER, only the leader is active) — breaks "
                                   "QUORUM-ONLY-LEADER-ACTIVE",
    "raft.no_truncation_on_diverging_epoch": "the quorum's leader never answers a DivergingEpoch (the Raft core's "
                                             "switch, reference_broker/raft/client.py FAULTS), so a deposed "
                                             "leader keeps its uncommitted records — breaks QUORUM-TRUNCATE-DEPOSED",
    "quorum.no_session_rearm": "a controller that becomes active does not give the registered live brokers fresh "
                               "sessions, so a broker that died before it became active is never fenced and its "
                               "partitions keep a dead leader (Kafka: BrokerHeartbeatManager tracks every active "
                               "broker from activation) — breaks QUORUM-FAILOVER-RESUMES-FENCING",
    "raft.no_fetch_timeout": "a voter following the quorum's leader never times out on it, so nobody is elected "
                             "after the leader dies or freezes (Kafka: FollowerState's fetch timeout starts an "
                             "election) — breaks QUORUM-FAILOVER-KILL, QUORUM-FAILOVER-PAUSE and, with no new "
                             "controller, QUORUM-METADATA-AFTER-FAILOVER",
    "quorum.no_activation_after_failover": "a controller elected Raft leader after the first one never becomes "
                                           "the active controller: DescribeQuorum names it, but no metadata "
                                           "changes are made (Kafka: QuorumController claims leadership once it "
                                           "replayed the log) — breaks QUORUM-METADATA-AFTER-FAILOVER",
    "describe_quorum.no_observers": "DescribeQuorum lists no observers although brokers fetch the metadata log "
                                    "(Kafka: LeaderState tracks every fetching non-voter) — breaks QUORUM-DESCRIBE",
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
