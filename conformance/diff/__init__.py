"""Differential mode: the same conversations sent to two targets, their answers compared field by field.

    python -m conformance.diff --a reference --b kafka [--out out/diff]
    python -m conformance.diff --a reference --b live --b-bootstrap 127.0.0.1:9092     # a running broker

Why: every rule the suites enforce says "this is what Apache Kafka does". Checks test the rules someone wrote down;
a differential run tests everything else too — every field of every answer — by asking Kafka itself. Reference vs
Kafka says where the executable spec drifts; X vs Kafka says where a broker under test does.

What is sent (two sources, one comparison):

- the suites' conversations: the suites run once against a fresh reference broker with a recorder attached to
  ``conformance.wire`` (``conformance.diff.recorder``), which keeps every check's requests with their connections,
  order and pauses (``conformance.diff.conversation``); each conversation is then replayed against both targets in
  lockstep (``conformance.diff.lockstep``), with fresh topic and group names. Checks that kill, pause or restart
  nodes, or need a 3-node cluster of their own, are left out (listed in the report);
- hypothesis-generated conversations: ``conformance.diff.machine.DiffMachine`` drives both targets in lockstep with
  requests the suites do not send and shrinks a difference to the shortest program, written out as a script.

How answers are compared: normalised by the ONE table of what may legitimately differ
(``conformance.diff.normalise.NORMALISATIONS``: ids, addresses, throttle, error texts, ...), then field by field
(``conformance.diff.compare``); a difference a ``reference_broker/GAPS.md`` row explains is *known*
(``compare.GAP_FIELDS``), every other one *unexplained*.

Output (``--out``): ``diff.json`` (per API key and version, per field: answers compared, answers that differ, the
first example with both answers and the request; the normalisation and gap tables; the conversations replayed and
left out; what the machine found) and ``index.html`` (rendered by ``python -m reports diff``), ``conversations.jsonl``
(reusable with ``--conversations``) and the machine's replay scripts.

Exit codes: 0 no unexplained difference, 1 unexplained differences, 2 could not run (bad arguments, a target
that does not start or cannot be reached, settings the conversations need that a target does not have).
"""
