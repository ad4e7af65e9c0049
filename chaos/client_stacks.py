"""Which client stack runs a workload: one place names every stack, so the stacks' modules (chaos/clients.py,
chaos/txn_clients.py, the Java driver in chaos/java/) need not import each other."""
from __future__ import annotations

from .clients import (
    CLIENTS,
    ClientConfig,
    ConfluentClient,
    KafkaPythonClient,
    QueueClient,
    ReferenceClient,
    check_group_protocol,
)
from .txn_clients import TXN_CLIENTS, ConfluentTxnClient, ReferenceTxnClient, TxnClient


def make_client(name: str, cfg: ClientConfig) -> QueueClient:
    """A client of the named stack (`CLIENTS`)."""
    check_group_protocol(name, cfg)
    if name == "kafka-python":
        return KafkaPythonClient(cfg)
    if name == "confluent":
        return ConfluentClient(cfg)
    if name == "reference":
        return ReferenceClient(cfg)
    if name == "java":
        from .java.driver import JavaClient

        return JavaClient(cfg)
    raise ValueError(f"unknown client {name!r}; choose from {', '.join(CLIENTS)}")


def check_client(name: str, cfg: ClientConfig) -> None:
    """Before a run: can this stack run with these settings? Raises ValueError saying what it refuses. The Java
    client is built if needed and constructs its producer and consumer (config, SSL, SASL errors surface here,
    not minutes later in a worker thread); the Python stacks check their settings as they connect."""
    if name not in CLIENTS:
        raise ValueError(f"unknown client {name!r}; choose from {', '.join(CLIENTS)}")
    check_group_protocol(name, cfg)
    if name == "java":
        from .java.driver import check_settings

        check_settings(cfg)


def make_txn_client(name: str, cfg: ClientConfig) -> TxnClient:
    """A transactional client of the named stack (TXN_CLIENTS)."""
    check_group_protocol(name, cfg)
    if name == "reference":
        return ReferenceTxnClient(cfg)
    if name == "confluent":
        return ConfluentTxnClient(cfg)
    if name == "java":
        from .java.driver import JavaTxnClient

        return JavaTxnClient(cfg)
    raise ValueError(f"--workload txn needs a client stack that does transactions: {', '.join(TXN_CLIENTS)} "
                     f"(not {name!r})")
