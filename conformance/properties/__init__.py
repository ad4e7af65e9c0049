"""Hypothesis state machines that drive a target and compare every answer with a simple model of Kafka's rules.

- ``machines``: ``LogMachine`` (produce/fetch/list_offsets/delete_records) and ``GroupMachine`` (join/leave/
  heartbeat/commit/fetch_offsets), one event loop per machine; ``model``: the models; ``ops``: one Kafka request
  per function (also used by the rebalance and ISR/HW suites); ``replay``: shrunk counterexamples as scripts.
- Run: ``pytest conformance/properties --target reference`` (CI profile ``kct-ci``, seconds) or with
  ``--hypothesis-profile thorough``; ``--conformance-replay-dir DIR`` keeps replay scripts (default: tmp dir).
  A divergence's message and evidence name its replay script: ``python SCRIPT [--bootstrap HOST:PORT]``.
"""
