"""Conformance suites: executable checks of Kafka's rules, run unchanged against any target.

How to write a check (framework: ``conformance.plugin``, loaded by ``-p conformance.plugin`` or the
``kct_conformance`` pytest11 entry point; targets come from ``fixtures.plugin``: ``--target reference|tansu|docker|live``)::

    import pytest
    from conformance.rules import rule

    rule("FETCH-MAXWAIT", "A parked fetch on an idle partition answers at max_wait_ms, not before",
         "ReplicaManager.fetchMessages / DelayedFetch.onExpiration", suite="fetch")

    @pytest.mark.rule("FETCH-MAXWAIT")                 # one or more catalogue ids; required for every check
    async def test_max_wait(wire, evidence):            # asyncio_mode=auto
        topic = await wire.create_topic()               # unique name; waits for a leader
        res = await wire.fetch([(topic, 0, 0)], max_wait_ms=500, min_bytes=1)
        evidence.timing("idle fetch", res.rtt_ms, expect_min_ms=500, expect_max_ms=1500, max_wait_ms=500)
        assert res.rtt_ms >= 500, f"answered after {res.rtt_ms:.0f} ms"   # AssertionError = divergence

Fixtures (all record into this check's evidence and the session history):
- ``evidence`` — :class:`conformance.evidence.Evidence`: ``note(key, value)``, ``timing(label, measured_ms,
  expect_min_ms=, expect_max_ms=, **context)`` (plotted in the report), ``exchange(...)`` (Wire does it for you).
- ``wire`` — :class:`conformance.wire.Wire` connected to the session target: ``create_topic``, ``produce``
  (one batch; unique values; ``size=`` bytes each), ``fetch`` / ``submit_fetch`` (every Fetch knob, exact RTT),
  ``list_offsets``, ``delete_records``, ``offset_commit`` / ``offset_fetch``, ``join_group`` /
  ``join_new_member`` / ``sync_group`` / ``heartbeat`` / ``leave_group``, ``metadata`` / ``leader`` /
  ``coordinator``, and ``request(api, msg)`` for anything else. Versions are pinned (``wire.VERSIONS``).
- ``wire_factory`` — ``async with await wire_factory() as w`` for a second client, or
  ``wire_factory(target=fresh_target)``. Inside hypothesis examples (where function-scoped fixtures are not
  re-run), open one per example: ``await Wire.connect(bootstrap, evidence=evidence, history=history)``.
- ``history`` — :class:`conformance.recording.SessionHistory`, one run id per session and target;
  ``history.process()`` gives a new client its process id; ``conformance.recording.Op`` records one operation
  (invoke, then ok/fail; leaving without either records info). ``conformance.clients`` wraps kafka-python and
  confluent-kafka consumers so their polls and commits are recorded too.
- from ``fixtures.plugin``: ``target``, ``bootstrap``, ``fresh_target`` (a target for this check alone: restarts,
  kills), marker ``requires_capability("replication", ...)`` (skips with the reason when the target lacks it).

Outcomes in the results file: ``pass``; ``divergence`` — any ``AssertionError``, including
:class:`conformance.wire.TargetDiverged`, which Wire raises when the broker closes the connection or never
answers; ``skipped`` with its reason; ``error`` — any other exception (harness or environment problem, says
nothing about the target). A check that cannot fail is a defect: prove each with a fault switch
(``--target-config faults=fetch.no_wake_on_append``; see ``reference_broker/faults.py`` and
``tests/conformance/``).

Histories declare ``partial_reads: true`` (checks read selectively), so ``lost-write``/``unseen`` from
``python -m reports check`` do not apply to them. Results: ``conformance-results/<run id>.json`` (``--kct-results DIR`` / ``--kct-results-file PATH``), history
in ``conformance-results/histories/<run id>.jsonl``; ``--alluredir DIR`` adds allure results (rule labels,
target parameter, evidence attachment). Report: ``python -m reports conformance RESULTS.json ... --out DIR``.

Suites: ``suites/test_fetch.py``, ``suites/test_offsets.py`` (this package's core), ``suites/test_rebalance.py``,
``suites/test_isr_hw.py``, ``suites/test_produce.py`` (idempotent producers: duplicates, also after a truncation
and a failover; InitProducerId), ``suites/test_transactions.py`` (transactional producers and read_committed
reads over the protocol, ``txn.py``: aborted and open transactions, the LSO, commit/abort visibility, offsets in
transactions, require_stable, fencing, timeouts, KIP-890 verification, CONCURRENT_TRANSACTIONS and markers across a
failover), ``suites/test_elr.py`` (eligible leader replicas, KIP-966, and DescribeTopicPartitions pagination),
``suites/test_clients.py`` (real clients, realistic data shapes), ``properties/`` (hypothesis state
machines). The replicated checks share ``cluster.py``: ``Cluster`` (faults by node id, requests to live
brokers) and ``Cluster.new_leader``, the one wait before a check asks the leader an election it caused produced
(that leader's own Metadata at the new epoch and a Fetch it serves, bounded from the target's settings).

KIP-848 consumer groups: ``suites/test_consumer_protocol.py`` (over ConsumerGroupHeartbeat: assignment, revoke before
assign, epochs, fencing, session and rebalance timeouts, leave, static members, regex and topics created later,
offsets with member epochs).
"""
