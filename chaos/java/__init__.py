"""The Java client (Apache Kafka's `kafka-clients`, the `kafka` target's version) as a chaos workload client.

`--client java` runs each workload process's client in its own JVM: `kct.chaos.Driver` (src/main/java, built by
`python -m chaos.java build` into ~/.cache/kct/java-driver/<hash>/, see build.py) drives a real KafkaProducer and
KafkaConsumer; the Python side (driver.py) only relays the workload's calls and the workload records them, so
every retry, timeout, metadata refresh, fetch and commit is the Java client's own. Three client stacks over one
broker tell a client bug from a broker bug.

Line protocol (stdin/stdout, one JSON object per line, UTF-8)
=============================================================
The JVM first prints ``{"ready": true, "kafka_clients": "4.4.0", "java": "17..."}``. Then each command
``{"id": n, "op": ..., ...}`` gets exactly one completion ``{"id": n, "ok": true, ...}`` or
``{"id": n, "ok": false, "error": KAFKA_ERROR_NAME or null, "exception": "class: message <- caused by ..."}``,
in order; the driver runs one command at a time. ``error`` is ``Errors.forException`` of what the Java client
raised (null when Kafka has no code for it).

- ``config {producer: {...}, consumer: {...}}``: the properties (Kafka's names) the clients are built with, lazily.
- ``check``: construct a producer and a consumer with them and close both: config, SSL and SASL errors show here.
- ``send {topic, partition, key, value}``: KafkaProducer.send, then the future: ``{offset, partition}``. An error
  carries ``appended: false`` when KafkaProducer.doSend failed before the record reached the accumulator (the
  callback ran on the calling thread): nothing was sent.
- ``assign {partitions: ["t/0", ...]}``, ``subscribe {topics}``, ``seek {topic, partition, offset}``.
- ``poll {timeout_ms, positions: bool}``: ``{records: [[topic, partition, offset, key, value], ...], positions:
  {"t/0": n}}``, positions only when asked (manual assignment) and only for partitions whose records start at
  or after the position read just before the poll.
- ``commit {offsets: {"t/0": n}, async: bool}``: commitSync, or commitAsync (done when it is sent).
- ``end_offsets {partitions, timeout_ms}``: ``{offsets: {"t/0": n}}`` (KafkaConsumer.endOffsets: the high watermark).
- ``positions``: ``{positions: {"t/0": n}}`` (KafkaConsumer.position per assigned partition, past markers).
- Transactions (the txn workload, chaos/txn.py; the producer then has transactional.id): ``txn_init``
  (initTransactions), ``txn_begin``, ``txn_send_offsets {offsets}`` (sendOffsetsToTransaction with the consumer's
  groupMetadata()), ``txn_commit``, ``txn_abort``; ``rewind`` seeks the consumer to its group's committed
  offsets (the beginning where none). A send inside a transaction is the plain ``send``.
- ``close``: close both clients (2 s each). The JVM halts when its stdin closes, so it never outlives its parent.

How outcomes reach the history (chaos/queue.py records; driver.py classifies like clients.py)
==============================================================================================
- send ok → ``ok`` with the offset; ``appended: false`` or an error in clients.definite_send_errors(acks) → ``fail``
  (the producer runs with retries=0, so one answer is about the one attempt); anything else (the Java client's
  request or delivery timeout, a lost connection) → ``info``.
- The JVM dies (killed, crashed) or gives no completion within a guard well beyond the Java client's own timeouts
  (then it is killed by PID): the pending send is ``info``, a pending poll ``fail`` (it delivered nothing), a
  pending commit ``info``. The next call starts a new JVM; a consumer gets its assignment back and is sought to
  the position the application had reached (the offset after the last record it was given, or its last seek), so
  the history continues exactly as if the same consumer had gone on: no false skip, no false re-read.
"""
