"""What the broker benchmarks measure, written once so a figure means the same in every script.

- `stats`: percentiles, medians over repeats, the machine's load.
- `clients`: topics, confluent-kafka produce/consume throughput, RSS per node while writing.
- `fetch`: parked-fetch wake latency and max_wait error, over the reference client's timed connection.
- `failover`: kill -9 of a partition leader through the target, time to a new leader in Metadata and the gaps a
  producer and a consumer see.
- `groups`: rebalance time after a member leaves or dies (reference client GroupConsumer).
- `nodes`: the PIDs of a target's nodes, and that none is left after stop().

Everything takes a bootstrap string or a started `fixtures` Target, never a broker's internals, so the same
measurement runs against the reference broker, Apache Kafka and Tansu (benchmarks/bench_vs_kafka.py,
bench_broker.py, bench_groups.py, bench_cluster.py).
"""
