"""What a request handler may use: the request's context and typed views of the node behind ``ctx.node``.

The server passes every handler a ``RequestContext`` whose ``node`` is the ``BrokerNode`` (client-facing APIs in
``apis/``) or the ``ControllerService`` (``controller/apis/``). Handlers are annotated with ``BrokerContext`` /
``ControllerContext`` (the context over ``BrokerView`` here / ``controller.context.ControllerView``) so that a reader (and a type checker, an editor's "go to definition") can follow
``ctx.broker.txn.end_txn`` from a handler to the coordinator that serves it. These are Protocols: they name the
part of the node a handler may reach, nothing more; ``BrokerNode`` and ``ControllerService`` satisfy them without
naming them. Adding a use of the node in a handler means adding it here, where it is seen.

Imports below are for types only: this module must not import the node (handlers sit above it; no loops).
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

if TYPE_CHECKING:
    from .clock import Clock
    from .config import BrokerConfig
    from .faults import Faults
    from .group_coordinator import GroupCoordinator
    from .metadata.image import BrokerRegistration, MetadataImage, PartitionState, TopicImage
    from .partition import Partition
    from .registry import Registry
    from .replica_manager import ReplicaManager
    from .txn_coordinator import Marker, TransactionCoordinator


class BrokerView(Protocol):
    """The broker node as broker handlers see it (implemented by ``node.BrokerNode``)."""

    node_id: int
    cluster_id: str
    config: BrokerConfig
    faults: Faults
    clock: Clock
    image: MetadataImage
    replicas: ReplicaManager              # partitions, the read path (fetch_messages), the write path (append_records)
    groups: GroupCoordinator
    txn: TransactionCoordinator

    @property
    def topics(self) -> dict[str, TopicImage]: ...

    @property
    def topics_by_id(self) -> dict[uuid.UUID, TopicImage]: ...

    @property
    def controller_id(self) -> int: ...

    def brokers(self) -> list[BrokerRegistration]: ...

    def partition(self, topic: str, index: int) -> Partition | None: ...

    def leader_partition(self, topic: str, index: int,
                         current_leader_epoch: int = -1) -> tuple[Partition | None, int]: ...

    def topic_setting(self, topic: str, key: str) -> Any: ...

    def next_producer_id(self) -> int: ...

    async def forward(self, request: Any, version: int, timeout: float = 30.0) -> Any: ...

    async def create_topic(self, name: str, num_partitions: int = -1, replication_factor: int = -1,
                           configs: dict[str, str] | None = None) -> tuple[int, str | None]: ...

    async def ensure_offsets_topic(self) -> int: ...

    async def coordinator_error(self, group_id: str) -> int: ...

    def coordinator_for(self, group_id: str) -> PartitionState | None: ...

    async def ensure_txn_topic(self) -> int: ...

    def txn_coordinator_for(self, txn_id: str) -> PartitionState | None: ...

    async def write_markers(self, markers: list[Marker], timeout_s: float) -> dict[tuple[str, int], int]: ...

    async def verify_txn(self, txn_id: str, producer_id: int, epoch: int, tps: list[tuple[str, int]],
                         add: bool = False) -> dict[tuple[str, int], int]: ...


N = TypeVar("N")


@dataclass
class RequestContext(Generic[N]):
    """What a handler knows about the request besides its body; ``node`` is the node serving it."""

    node: N
    registry: Registry
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    peer: str
    received_at: float

    @property
    def broker(self) -> N:
        return self.node


BrokerContext = RequestContext[BrokerView]            # a broker handler's context
