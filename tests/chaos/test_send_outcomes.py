"""Which producer errors prove that nothing was appended (the history's `fail` vs `info` for a send), and which
anomalies a run cannot prove when its final read did not complete.

With acks=all, Kafka completes a parked produce with NOT_LEADER_OR_FOLLOWER when leadership moves before the ISR
acknowledged, although the records are already in the log (ReplicaManager completing delayed produces on becoming a
follower; Partition.checkEnoughReplicasReachOffset). A chaos matrix run (reference cluster, isolate-controller, Java
client) read such a value back, and the checker, told the send `fail`ed, reported an aborted read (G1a)."""
from __future__ import annotations

import kafka.errors as KE
import pytest

from chaos.clients import Definite, Indefinite, classify, definite_send_errors


@pytest.mark.parametrize("exc", [KE.NotLeaderForPartitionError()])
def test_not_leader_with_acks_all_is_unknown_outcome(exc: Exception) -> None:
    assert isinstance(classify(exc, -1), Indefinite)
    assert isinstance(classify(exc, 1), Definite), "with acks=1 the leader answers at its append: nothing appended"


def test_refusals_before_the_append_stay_definite_with_acks_all() -> None:
    assert isinstance(classify(KE.NotEnoughReplicasError(), -1), Definite)
    assert isinstance(classify(KE.UnknownTopicOrPartitionError(), -1), Definite)
    assert isinstance(classify(KE.NotEnoughReplicasAfterAppendError(), -1), Indefinite)
    assert {"NOT_LEADER_OR_FOLLOWER", "NOT_LEADER_FOR_PARTITION"}.isdisjoint(definite_send_errors(-1))
    assert "NOT_LEADER_OR_FOLLOWER" in definite_send_errors(1)


def test_confluent_error_names_classify_the_same() -> None:
    from confluent_kafka import KafkaError

    from chaos.clients import _ConfluentErr

    err = _ConfluentErr(KafkaError(KafkaError.NOT_LEADER_FOR_PARTITION))
    assert isinstance(classify(err, -1), Indefinite)


def test_a_librdkafka_retriable_refusal_is_unknown() -> None:
    """librdkafka re-sends a message to a new leader without counting it against retries=0, so a delivery report's
    NOT_ENOUGH_REPLICAS says only that the last attempt appended nothing. Seen in a chaos run (reference cluster,
    isolate-controller, confluent): a value reported NOT_ENOUGH_REPLICAS was read at offset 462 (a false G1a); the
    same error from kafka-python (one attempt) stays definite."""
    from confluent_kafka import KafkaError

    from chaos.clients import _ConfluentErr

    for code in (KafkaError.NOT_ENOUGH_REPLICAS, KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE,
                 KafkaError.UNKNOWN_TOPIC_OR_PART):
        assert isinstance(classify(_ConfluentErr(KafkaError(code)), 1), Indefinite), code
    assert isinstance(classify(KE.NotEnoughReplicasError(), -1), Definite)


def test_every_stack_names_the_size_and_topic_refusals_definite() -> None:
    """kafka-python and librdkafka spell Kafka's MESSAGE_TOO_LARGE / INVALID_TOPIC_EXCEPTION their own way; before,
    those sends were recorded `info` (unknown) on those stacks and `fail` on the Java one."""
    from confluent_kafka import KafkaError

    from chaos.clients import _ConfluentErr

    for exc in (KE.MessageSizeTooLargeError(), KE.InvalidTopicError(),
                _ConfluentErr(KafkaError(KafkaError.MSG_SIZE_TOO_LARGE)), _ConfluentErr(KafkaError(KafkaError.TOPIC_EXCEPTION))):
        assert isinstance(classify(exc, -1), Definite), exc


def test_unseen_is_not_a_verdict_when_the_final_read_did_not_complete() -> None:
    """A Tansu run of the chaos matrix (kill, confluent) ended with 'no end offsets before the deadline' and was
    reported INVALID for 20 unseen writes: their absence from reads that never came proves nothing."""
    from chaos.run import only_unproven_without_final_read

    lin_ok = {"partition-log": {"verdict": "ok"}, "committed-offsets": {"verdict": "ok"}}
    assert only_unproven_without_final_read({"anomalies": {"bad": ["unseen"]}, "linearizability": lin_ok})
    assert not only_unproven_without_final_read({"anomalies": {"bad": ["unseen", "lost-write"]},
                                                 "linearizability": lin_ok})
    assert not only_unproven_without_final_read({"anomalies": {"bad": ["unseen"]}, "linearizability": {
        "partition-log": {"verdict": "illegal"}}})
    assert not only_unproven_without_final_read({"anomalies": {"bad": []}, "linearizability": lin_ok})
    assert not only_unproven_without_final_read(None)


def test_a_final_read_without_end_offsets_says_why() -> None:
    """The matrix's Tansu cells said only "no end offsets before the deadline"; the cause (the broker resetting the
    connection on its ListOffsets SQL error) took a debug session to find. The last client error is now reported."""
    from chaos.clients import ClientConfig
    from chaos.queue import QueueSpec, QueueWorkload
    from fixtures.net import free_port

    spec = QueueSpec(partitions=1, final_timeout_s=1.5)
    out = QueueWorkload(spec, None, "confluent", ClientConfig(f"127.0.0.1:{free_port()}", timeout_s=0.5)).final_read()
    assert out["complete"] is False
    assert out["error"].startswith("no end offsets before the deadline (last: KafkaException: "), out
