"""--client-config speaks the Kafka clients' names; the kafka-python admin that creates the workload topic (and the
kafka-python stack) gets them translated, or the run is refused up front with the setting named.

Before: the names were passed through with dots turned into underscores, so any librdkafka or Java name that
kafka-python does not share (ssl.ca.location, sasl.username, sasl.jaas.config...) made KafkaAdminClient raise a
configuration error, retried for 30 s and reported as "could not create topic"."""
from __future__ import annotations

import time
from pathlib import Path

import pytest

from chaos.cli import main
from chaos.clients import kafka_python_settings


def test_librdkafka_and_java_names_translate() -> None:
    assert kafka_python_settings({
        "security.protocol": "sasl_ssl", "sasl.mechanisms": "PLAIN", "sasl.username": "u", "sasl.password": "p",
        "ssl.ca.location": "/ca.pem", "ssl.endpoint.identification.algorithm": "none"}) == {
        "security_protocol": "SASL_SSL", "sasl_mechanism": "PLAIN", "sasl_plain_username": "u",
        "sasl_plain_password": "p", "ssl_cafile": "/ca.pem", "ssl_check_hostname": False}
    java = kafka_python_settings({
        "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" '
                            'password="s\\"cret";',
        "ssl.truststore.type": "PEM", "ssl.truststore.location": "/trust.pem"})
    assert java == {"security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512", "sasl_plain_username": "alice",
                    "sasl_plain_password": 's\\"cret', "ssl_cafile": "/trust.pem"}


def test_a_jks_only_tls_setting_is_refused_naming_the_key() -> None:
    with pytest.raises(ValueError, match="ssl.truststore.location.*ssl.ca.location"):
        kafka_python_settings({"security.protocol": "SSL", "ssl.truststore.location": "/t.jks"})
    # with the PEM form beside it, the Java names are the Java client's business
    assert kafka_python_settings({"security.protocol": "SSL", "ssl.truststore.location": "/t.jks",
                                  "ssl.ca.location": "/ca.pem"}) == {"security_protocol": "SSL", "ssl_cafile": "/ca.pem"}


def test_a_jks_only_tls_run_is_refused_before_any_cluster(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    t0 = time.monotonic()
    rc = main(["run", "--client", "confluent", "--client-config", "security.protocol=SSL", "--client-config",
               "ssl.keystore.location=/k.jks", "--nemesis", "none", "--duration", "3s", "--out", str(tmp_path),
               "--quiet"])
    err = capsys.readouterr().err
    assert rc == 2 and "ssl.keystore.location" in err, err
    assert time.monotonic() - t0 < 10 and not list(tmp_path.iterdir())


def test_librdkafka_names_on_a_plaintext_run_create_the_topic(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """Settings a PLAINTEXT cluster ignores must not stop the run (before: 30 s, then 'could not create topic')."""
    rc = main(["run", "--client", "confluent", "--client-config", "security.protocol=plaintext",
               "--client-config", "sasl.username=nobody", "--nemesis", "none", "--duration", "3s",
               "--rate", "20", "--out", str(tmp_path), "--quiet"])
    err = capsys.readouterr().err
    assert rc == 0, err
