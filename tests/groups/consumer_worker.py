"""A group consumer in its own process, so a test can make it leave (SIGTERM) or crash (SIGKILL).

    python consumer_worker.py CLIENT BOOTSTRAP GROUP TOPIC OUT [STRATEGY]

CLIENT is kafka-python or confluent. Each consumed record is appended to OUT as a JSON line *before* its offset
is committed synchronously (process, then commit), so a crash can only cause redelivery, never loss.
"""
from __future__ import annotations

import json
import signal
import sys

stop = False


def _term(*_):
    global stop
    stop = True


def main() -> int:
    client, bootstrap, group, topic, out = sys.argv[1:6]
    strategy = sys.argv[6] if len(sys.argv) > 6 else "range"
    signal.signal(signal.SIGTERM, _term)
    f = open(out, "a", buffering=1)
    if client == "confluent":
        from confluent_kafka import Consumer, KafkaException
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                      "enable.auto.commit": False, "session.timeout.ms": 3000, "heartbeat.interval.ms": 300,
                      "partition.assignment.strategy": strategy})
        c.subscribe([topic])
        while not stop:
            m = c.poll(0.2)
            if m is None or m.error():
                continue
            f.write(json.dumps({"p": m.partition(), "o": m.offset(), "v": m.value().decode()}) + "\n")
            try:
                c.commit(message=m, asynchronous=False)
            except KafkaException as e:
                # e.g. REBALANCE_IN_PROGRESS while CompletingRebalance: the record may be redelivered
                print(f"commit failed: {e}", file=sys.stderr, flush=True)
        c.close()
    else:
        from kafka import KafkaConsumer
        from kafka.errors import KafkaError
        c = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                          enable_auto_commit=False, session_timeout_ms=3000, heartbeat_interval_ms=300)
        while not stop:
            for _tp, msgs in c.poll(timeout_ms=200).items():
                for m in msgs:
                    f.write(json.dumps({"p": m.partition, "o": m.offset, "v": m.value.decode()}) + "\n")
                    try:
                        c.commit()
                    except KafkaError as e:
                        print(f"commit failed: {e}", file=sys.stderr, flush=True)
        c.close()
    f.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
