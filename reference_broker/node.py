"""BrokerNode: one broker process — its listener and handlers, its metadata image, replica manager, replica
fetchers and group coordinator, and its link to the controller (Kafka's ``BrokerServer`` with
``BrokerLifecycleManager`` and ``BrokerMetadataPublisher``).

Lifecycle (KIP-631): take the port (not listening yet); register with the controller (BrokerRegistration, retried
while the controller refuses, e.g. DUPLICATE_BROKER_REGISTRATION during a previous incarnation's session);
replicate the metadata log (Fetch on ``__cluster_metadata``) and apply it to the image and the replica manager;
heartbeat every broker.heartbeat.interval.ms; once the controller unfenced it and the image says so, listen and
print READY (Kafka enables request processing only then: a client never meets a broker that knows no brokers).
Controlled shutdown (on SIGTERM) heartbeats WantShutDown until the controller grants it. While the controller is unreachable the node
keeps serving with its last image. Admin requests that change metadata (CreateTopics, DeleteTopics, ElectLeaders,
auto-creation) are forwarded to the controller, which answers once the live brokers applied them.

Handlers in apis/ see this object (``ctx.broker``) through ``context.BrokerView``, which names what they may use; the
coordinators see only narrow inputs (their ``CoordinatorPartitionWriter``, which writes through
``ReplicaManager.append_records``).
Threading rule: everything runs on the node's event loop.
"""
from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import uuid
from pathlib import Path
from typing import Any

from kafka import errors as E
from kafka.protocol.admin import CreateTopicsRequest
from kafka.protocol.consumer import FetchRequest
from kafka.protocol.producer import AddPartitionsToTxnRequest

from .aio import cancel_and_wait
from .client.protocol import Connection
from .clock import Clock, make_rng
from .config import BrokerConfig
from .controller.messages import (
    AlterPartitionRequest,
    BrokerHeartbeatRequest,
    BrokerRegistrationRequest,
)
from .controller.quorum import parse_voters
from .coordinator_writer import CoordinatorPartitionWriter
from .datadir import DataDirError, prepare_data_dir
from .faults import Faults
from .group_coordinator import GroupCoordinator
from .metadata.image import BrokerRegistration, Delta, MetadataImage, PartitionState, TopicImage
from .metadata.records import METADATA_TOPIC, decode_batches
from .offset_store import GROUP, OFFSETS_TOPIC, TXN, OffsetStore
from .partition import AppendOrigin, MarkerAppend, Partition
from .replica_fetcher import ReplicaFetcherManager
from .replica_manager import AppendEntry, ReplicaManager
from .server import Server
from .topic_config import topic_setting
from .txn_coordinator import TXN_TOPIC, TransactionCoordinator
from .txn_marker_channel import Marker, TxnMarkerChannel

log = logging.getLogger("reference_broker.node")

NOT_COORDINATOR = E.NotCoordinatorError.errno
COORDINATOR_NOT_AVAILABLE = E.CoordinatorNotAvailableError.errno
STALE_BROKER_EPOCH = E.StaleBrokerEpochError.errno
DUPLICATE_BROKER_REGISTRATION = E.DuplicateBrokerRegistrationError.errno
CLEAN_SHUTDOWN_FILE = "clean_shutdown.json"
NOT_CONTROLLER = E.NotControllerError.errno
NOT_LEADER = E.NotLeaderForPartitionError.errno    # Kafka's NOT_LEADER_OR_FOLLOWER


class NodeStartError(RuntimeError):
    """The node could not join the cluster (controller unreachable, registration refused) in time."""


def parse_address(value: str) -> tuple[str, int]:
    """``HOST:PORT`` or Kafka's ``PLAINTEXT://HOST:PORT``."""
    value = value.split("://", 1)[-1].split(",", 1)[0].strip()
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ValueError(f"expected HOST:PORT, got {value!r}")
    return host, int(port)


class ControllerSelector:
    """The controllers a broker may reach and the one it takes to be active (KIP-595/KIP-631: a broker talks to the
    quorum's leader). Several links share one selector, so when one learns the active controller moved, all follow."""

    def __init__(self, addresses: list[tuple[str, int]], ids: list[int] | None = None) -> None:
        self.addresses = addresses
        self.ids = ids or []
        self.index = 0

    def move_on(self, from_index: int, hint: int | None = None) -> None:
        """The controller at ``from_index`` is not active (or unreachable): go to the leader it named, else the
        next voter. A no-op when another link already moved on."""
        if self.index != from_index:
            return
        if hint is not None and hint in self.ids and self.ids.index(hint) != from_index:
            self.index = self.ids.index(hint)
        else:
            self.index = (self.index + 1) % len(self.addresses)


def _not_active(body: Any) -> tuple[bool, int | None]:
    """(whether ``body`` says "not the active controller", the leader it names if any): NOT_CONTROLLER at the top
    or on every topic, or NOT_LEADER_OR_FOLLOWER for ``__cluster_metadata`` (Fetch, DescribeQuorum)."""
    if getattr(body, "error_code", 0) == NOT_CONTROLLER:
        return True, None
    for attr in ("topics", "responses"):
        items = getattr(body, attr, None)
        if not items:
            continue
        first = items[0]
        parts = getattr(first, "partitions", None)
        if parts and getattr(first, "topic", getattr(first, "topic_name", None)) == METADATA_TOPIC:
            p = parts[0]
            if p.error_code == NOT_LEADER:
                cur = getattr(p, "current_leader", None)
                leader = cur.leader_id if cur is not None else getattr(p, "leader_id", -1)
                return True, (leader if leader is not None and leader >= 0 else None)
            return False, None
        if all(getattr(t, "error_code", 0) == NOT_CONTROLLER for t in items):
            return True, None
    return False, None


class ControllerLink:
    """One connection to the (active) controller, reopened on failure; RPCs on it are answered in order. With a
    quorum, an answer saying "not the active controller" is retried at once on the leader it names or the next
    voter; a failed connection moves the shared selector on, so the caller's retry goes elsewhere."""

    def __init__(self, address: tuple[str, int] | ControllerSelector, client_id: str) -> None:
        self.selector = address if isinstance(address, ControllerSelector) else ControllerSelector([address])
        self.client_id = client_id
        self.conn: Connection | None = None
        self._conn_addr: tuple[str, int] | None = None

    @property
    def address(self) -> tuple[str, int]:
        return self.selector.addresses[self.selector.index]

    async def request(self, msg: Any, version: int, timeout: float) -> Any:
        sel = self.selector
        attempts = 2 * len(sel.addresses) if len(sel.addresses) > 1 else 1
        for attempt in range(attempts):
            idx = sel.index
            addr = sel.addresses[idx]
            if self.conn is None or self.conn.closed or self._conn_addr != addr:
                await self.close()
                try:
                    self.conn = await Connection.connect(*addr, client_id=self.client_id, timeout=3.0)
                except (OSError, TimeoutError):
                    if len(sel.addresses) == 1 or attempt == attempts - 1:
                        raise
                    sel.move_on(idx)        # nothing was sent: try the next controller at once
                    continue
                self._conn_addr = addr
            try:
                body = (await self.conn.request(msg, version, timeout=timeout)).body
            except BaseException:
                await self.close()
                if len(sel.addresses) > 1:
                    sel.move_on(idx)
                raise
            if len(sel.addresses) > 1 and attempt < attempts - 1:
                redirect, hint = _not_active(body)
                if redirect:
                    sel.move_on(idx, hint)
                    await asyncio.sleep(0.02 if hint is not None else 0.05)
                    continue
            return body
        raise AssertionError("unreachable")

    async def close(self) -> None:
        if self.conn is not None:
            conn, self.conn = self.conn, None
            try:
                await conn.close()
            except Exception:
                pass


class BrokerNode:
    def __init__(self, config: BrokerConfig, data_dir: Path | None, *, controller: tuple[str, int],
                 clock: Clock | None = None, seed: int | None = None, faults: Faults | None = None) -> None:
        self.config = config
        self.faults = faults or Faults()
        self.node_id: int = config["node.id"]
        self.cluster_id: str = config["cluster.id"]
        self.data_dir = data_dir
        self.clock = clock or Clock()
        self.rng = make_rng(seed)
        self.controller_address = controller
        self.host = "127.0.0.1"
        self.port = 0
        self.image = MetadataImage()
        config.bind_dynamic(self.image, self.node_id)     # dynamic broker configs come from the metadata log
        self.broker_epoch = -1
        self.previous_broker_epoch = -1          # set from a clean shutdown marker in the data dir (KIP-966)
        self.fenced = True
        self._unfenced = asyncio.Event()
        self._live_in_image = asyncio.Event()    # our image shows us registered and unfenced
        self._next_producer_id = (self.node_id + 1) * 1_000_000_000
        if data_dir is not None:
            self._open_data_dir(data_dir)
        self.replicas = ReplicaManager(self.node_id, config, self.clock, self.faults, data_dir, self._alter_isr)
        self.replicas.on_leadership = self._on_leadership
        self.fetchers = ReplicaFetcherManager(self.node_id, self._replica_address, self.replicas.followed,
                                              config, self.clock,
                                              self.faults.on("replication.ignore_diverging_epoch"))
        self.replicas.on_follow = self.fetchers.update
        # The coordinators write through one partition writer each, both through ReplicaManager.append_records.
        self.offsets_writer = CoordinatorPartitionWriter(self.replicas, OFFSETS_TOPIC,
                                                         config["offsets.topic.num.partitions"], GROUP)
        self.txn_writer = CoordinatorPartitionWriter(self.replicas, TXN_TOPIC,
                                                     config["transaction.state.log.num.partitions"], TXN)
        self.groups = GroupCoordinator(config, self.clock, self.rng, self.faults,
                                       OffsetStore(self.offsets_writer, self.clock.wall_ms))
        self.markers = TxnMarkerChannel(self.node_id, self.clock, self._leader_of, self.write_markers,
                                        self._marker_request)
        self.txn = TransactionCoordinator(config, self.clock, self.faults, self.txn_writer,
                                          self.next_producer_id, self.markers, self._offsets_partition_of)
        self.server = Server(self)
        # One connection per purpose, as Kafka keeps a channel per manager: the controller answers a connection's
        # requests in order, so an ISR change must not queue behind a forwarded CreateTopics that waits for
        # brokers to apply it, nor a heartbeat behind either.
        voters = parse_voters(config["controller.quorum.voters"])
        self.controllers = (ControllerSelector(list(voters.values()), list(voters)) if voters
                            else ControllerSelector([controller]))
        self._links = {name: ControllerLink(self.controllers, f"broker-{self.node_id}-{name}")
                       for name in ("metadata", "heartbeat", "alter", "rpc")}
        self._tasks: list[asyncio.Task] = []
        self._link_overrides = self._parse_links(config["replica.link.addresses"])
        self._peer_links: dict[tuple[int, str], ControllerLink] = {}

    # -- data dir ---------------------------------------------------------------------------------------------

    def _open_data_dir(self, d: Path) -> None:
        prepare_data_dir(d)
        self.previous_broker_epoch = self._take_clean_shutdown_marker(d)
        meta = d / "node.json"
        if meta.exists():
            try:
                doc = json.loads(meta.read_text())
                self._next_producer_id = max(self._next_producer_id, int(doc["next_producer_id"]))
            except (ValueError, KeyError, TypeError) as e:
                raise DataDirError(f"{meta} is corrupt ({type(e).__name__}: {e}); refusing to start") from None

    @staticmethod
    def _take_clean_shutdown_marker(d: Path) -> int:
        """The broker epoch a clean shutdown left behind (Kafka's clean shutdown file with the broker epoch,
        KIP-966), removed so that a crash of this incarnation is not taken for a clean one; -1 without it."""
        marker = d / CLEAN_SHUTDOWN_FILE
        try:
            epoch = int(json.loads(marker.read_text())["broker_epoch"])
        except (OSError, ValueError, KeyError, TypeError):
            epoch = -1
        with contextlib.suppress(OSError):
            marker.unlink()
        return epoch

    def _write_clean_shutdown_marker(self) -> None:
        if self.data_dir is None or self.broker_epoch < 0:
            return
        tmp = self.data_dir / (CLEAN_SHUTDOWN_FILE + ".tmp")
        with open(tmp, "w") as f:
            json.dump({"broker_epoch": self.broker_epoch}, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.data_dir / CLEAN_SHUTDOWN_FILE)

    def _save_node_state(self) -> None:
        if self.data_dir is None:
            return
        tmp = self.data_dir / "node.json.tmp"
        with open(tmp, "w") as f:
            json.dump({"node_id": self.node_id, "next_producer_id": self._next_producer_id}, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.data_dir / "node.json")

    @staticmethod
    def _parse_links(spec: str) -> dict[int, tuple[str, int]]:
        out = {}
        for part in filter(None, (x.strip() for x in spec.split(","))):
            bid, _, addr = part.partition("=")
            out[int(bid)] = parse_address(addr)
        return out

    # -- the cluster view handlers use ------------------------------------------------------------------------

    @property
    def topics(self) -> dict[str, TopicImage]:
        return self.image.topics

    @property
    def topics_by_id(self) -> dict[uuid.UUID, TopicImage]:
        return self.image.topics_by_id

    def brokers(self) -> list[BrokerRegistration]:
        """Live (unfenced) brokers with their advertised addresses, as Metadata lists them."""
        return self.image.live_brokers()

    @property
    def controller_id(self) -> int:
        """KRaft: clients cannot reach the controller; Metadata names a live broker instead (the lowest id)."""
        live = self.image.live_brokers()
        return live[0].broker_id if live else -1

    def partition(self, topic: str, index: int) -> Partition | None:
        """The local replica of a partition, if this broker hosts it."""
        return self.replicas.get(topic, index)

    def leader_partition(self, topic: str, index: int,
                         current_leader_epoch: int = -1) -> tuple[Partition | None, int]:
        """(local leader replica, error): UNKNOWN_TOPIC_OR_PARTITION when the cluster has no such partition,
        NOT_LEADER_OR_FOLLOWER when this broker does not lead it, FENCED/UNKNOWN_LEADER_EPOCH when the request's
        current leader epoch is older/newer than ours (KIP-320)."""
        p, err = self.replicas.leader_or_error(topic, index)
        if err:
            return p, err
        return p, p.check_leader_epoch(current_leader_epoch)

    def topic_setting(self, topic: str, key: str) -> Any:
        t = self.image.topics.get(topic)
        return topic_setting(t.configs if t else {}, self.config, key)

    def next_producer_id(self) -> int:
        pid = self._next_producer_id
        self._next_producer_id += 1
        self._save_node_state()
        return pid

    # -- requests to the controller ---------------------------------------------------------------------------

    async def forward(self, request: Any, version: int, timeout: float = 30.0) -> Any:
        """Send an admin request to the controller (KRaft forwarding) and return its answer body."""
        if getattr(request, "_header", None) is None:
            request._header = None        # a decoded request has no header slot set; encoding reads it
        body = await self._links["rpc"].request(request, version, timeout)
        body._header = None               # answered to our client with its own correlation id
        return body

    async def create_topic(self, name: str, num_partitions: int = -1, replication_factor: int = -1,
                           configs: dict[str, str] | None = None) -> tuple[int, str | None]:
        T = CreateTopicsRequest.CreatableTopic
        req = CreateTopicsRequest(topics=[T(name=name, num_partitions=num_partitions,
                                            replication_factor=replication_factor, assignments=[],
                                            configs=[T.CreatableTopicConfig(name=k, value=v)
                                                     for k, v in (configs or {}).items()])],
                                  timeout_ms=30_000, validate_only=False)
        try:
            resp = await self.forward(req, 7)
        except (OSError, TimeoutError, E.KafkaError) as e:
            return E.RequestTimedOutError.errno, f"controller unreachable: {e}"
        r = resp.topics[0]
        return r.error_code, r.error_message

    async def ensure_offsets_topic(self) -> int:
        """Create ``__consumer_offsets`` on first use, as Kafka does on the first FindCoordinator; 0 or an error.

        Always with offsets.topic.replication.factor (Kafka's ``AutoTopicCreationManager.creatableTopic``): the
        controller places replicas on fenced brokers too when the live ones are too few, and refuses only while
        fewer brokers are registered (INVALID_REPLICATION_FACTOR); the answer is then COORDINATOR_NOT_AVAILABLE,
        so an early lookup cannot leave the topic under-replicated forever."""
        if OFFSETS_TOPIC in self.image.topics:
            return 0
        rf = self.config["offsets.topic.replication.factor"]
        if self.faults.on("offsets.topic_rf_capped"):
            rf = min(rf, max(1, len(self.image.live_brokers())))
        err, _ = await self.create_topic(OFFSETS_TOPIC, self.config["offsets.topic.num.partitions"], rf,
                                         {"cleanup.policy": "compact"})
        if err not in (0, E.TopicAlreadyExistsError.errno):
            return COORDINATOR_NOT_AVAILABLE
        return 0

    async def coordinator_error(self, group_id: str) -> int:
        """0 when this broker coordinates ``group_id``, else NOT_COORDINATOR (or COORDINATOR_NOT_AVAILABLE)."""
        err = await self.ensure_offsets_topic()
        if err:
            return err
        return 0 if self.groups.owns(group_id) else NOT_COORDINATOR

    def coordinator_for(self, group_id: str) -> PartitionState | None:
        t = self.image.topics.get(OFFSETS_TOPIC)
        if t is None:
            return None
        return t.partitions[self.offsets_writer.partition_for(group_id)]

    def _offsets_partition_of(self, group_id: str) -> tuple[str, int]:
        return OFFSETS_TOPIC, self.offsets_writer.partition_for(group_id)

    # -- transactions (the coordinator's narrow interface and the broker-to-broker calls it needs) -------------

    async def ensure_txn_topic(self) -> int:
        """Create ``__transaction_state`` on the first transactional FindCoordinator (Kafka's
        AutoTopicCreationManager, with transaction.state.log.* settings); 0 or COORDINATOR_NOT_AVAILABLE."""
        if TXN_TOPIC in self.image.topics:
            return 0
        err, _ = await self.create_topic(TXN_TOPIC, self.config["transaction.state.log.num.partitions"],
                                         self.config["transaction.state.log.replication.factor"],
                                         {"cleanup.policy": "compact",
                                          "min.insync.replicas": str(self.config["transaction.state.log.min.isr"])})
        if err not in (0, E.TopicAlreadyExistsError.errno):
            return COORDINATOR_NOT_AVAILABLE
        return 0

    def txn_coordinator_for(self, txn_id: str) -> PartitionState | None:
        t = self.image.topics.get(TXN_TOPIC)
        if t is None:
            return None
        return t.partitions[self.txn_writer.partition_for(txn_id)]

    async def _broker_call(self, broker_id: int, purpose: str, request: Any, version: int, timeout: float) -> Any:
        """One request to another broker over the broker-to-broker path (the replication address, or its link
        proxy), one connection per (broker, purpose), reopened after a failure."""
        key = (broker_id, purpose)
        link = self._peer_links.get(key)
        address = self._replica_address(broker_id)
        if address is None:
            raise OSError(f"broker {broker_id} has no known address")
        if link is None or link.address != address:
            if link is not None:
                await link.close()
            link = self._peer_links[key] = ControllerLink(address, f"broker-{self.node_id}-{purpose}")
        return await link.request(request, version, timeout)

    def _leader_of(self, topic: str, partition: int) -> int | None:
        """The marker channel's view of a partition: its leader now (-1: none), None when it does not exist."""
        st = self.image.partition(topic, partition)
        return None if st is None else st.leader

    async def _marker_request(self, broker_id: int, request: Any, version: int, timeout: float) -> Any:
        return await self._broker_call(broker_id, "markers", request, version, timeout)

    async def write_markers(self, markers: list[Marker], timeout_s: float) -> dict[tuple[str, int], int]:
        """The leader's side of WriteTxnMarkers (KafkaApis.handleWriteTxnMarkersRequest): append each marker
        (acks=all, origin COORDINATOR), tell the group coordinator about markers on __consumer_offsets partitions,
        and answer once they are replicated (REQUEST_TIMED_OUT after ``timeout_s``)."""
        pending = self.replicas.append_records(
            [AppendEntry(m.topic, m.partition, marker=MarkerAppend(m.producer_id, m.producer_epoch,
                                                                   m.coordinator_epoch, m.commit,
                                                                   m.transaction_version))
             for m in markers], -1, AppendOrigin.COORDINATOR, timeout_s)
        for m in markers:
            r = pending.results[(m.topic, m.partition)]
            if m.topic == OFFSETS_TOPIC and not r.error:
                self.groups.complete_txn(m.partition, m.producer_id, m.commit, r.end_offset)
        return {tp: r.error for tp, r in (await pending.wait()).items()}

    async def verify_txn(self, txn_id: str, producer_id: int, epoch: int,
                         tps: list[tuple[str, int]], add: bool = False) -> dict[tuple[str, int], int]:
        """KIP-890 (AddPartitionsToTxnManager): ask the transaction's coordinator whether these partitions are in
        the ongoing transaction (part 1), or with ``add`` have it add them (part 2: Produce v12 / TxnOffsetCommit
        v5, transaction version 2); locally, or AddPartitionsToTxn v4 verify_only / v5 over the broker link."""
        st = self.txn_coordinator_for(txn_id)
        if st is None or st.leader < 0:
            return dict.fromkeys(tps, E.CoordinatorNotAvailableError.errno)
        if st.leader == self.node_id:
            if add:
                return await self._add_local(txn_id, producer_id, epoch, tps)
            return self.txn.verify(txn_id, producer_id, epoch, tps)
        T = AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction
        by_topic: dict[str, list[int]] = {}
        for t, p in tps:
            by_topic.setdefault(t, []).append(p)
        version = 5 if add else 4
        req = AddPartitionsToTxnRequest[version](transactions=[T(
            transactional_id=txn_id, producer_id=producer_id, producer_epoch=epoch, verify_only=not add,
            topics=[T.AddPartitionsToTxnTopic(name=t, partitions=ps) for t, ps in by_topic.items()])])
        req._header = None
        try:
            resp = await self._broker_call(st.leader, "verify", req, version, timeout=10.0)
        except (OSError, TimeoutError, E.KafkaError):
            return dict.fromkeys(tps, E.NetworkExceptionError.errno)
        if resp.error_code:
            return dict.fromkeys(tps, resp.error_code)
        out = {}
        for r in resp.results_by_transaction:
            for tr in r.topic_results:
                for pr in tr.results_by_partition:
                    out[(tr.name, pr.partition_index)] = pr.partition_error_code
        return out

    async def _add_local(self, txn_id: str, producer_id: int, epoch: int,
                         tps: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """The coordinator here adds the partitions for a partition leader (handleAddPartitionsToTransaction with
        transaction version 2, as AddPartitionsToTxn v5 without verify_only asks)."""
        err = await self.txn.add_partitions(txn_id, producer_id, epoch, set(tps), tv=2)
        return dict.fromkeys(tps, err)

    async def _alter_isr(self, p: Partition, new_isr: list[int]) -> tuple[int, PartitionState | None]:
        T = AlterPartitionRequest.TopicData
        req = AlterPartitionRequest(broker_id=self.node_id, broker_epoch=self.broker_epoch, topics=[
            T(topic_id=p.topic_id, partitions=[T.PartitionData(partition_index=p.index, leader_epoch=p.leader_epoch,
                                                               new_isr=new_isr, partition_epoch=p.partition_epoch)])])
        resp = await self._links["alter"].request(req, 0, timeout=10.0)
        if resp.error_code:                    # STALE_BROKER_EPOCH answers the whole request, with no topics
            return resp.error_code, None
        pd = resp.topics[0].partitions[0]
        if pd.error_code:
            return pd.error_code, None
        return 0, PartitionState(p.topic, p.topic_id, p.index, p.replicas, list(pd.isr), pd.leader_id,
                                 pd.leader_epoch, pd.partition_epoch)

    def _on_leadership(self, p: Partition, leader: bool) -> None:
        if p.topic == TXN_TOPIC:
            if leader:
                self.txn.load_partition(p.index, p.leader_epoch)
            else:
                self.txn.unload_partition(p.index)
            return
        if p.topic != OFFSETS_TOPIC:
            return
        if leader:
            self.groups.load_partition(p.index)
        else:
            self.groups.unload_partition(p.index)

    # -- replication addresses --------------------------------------------------------------------------------

    def _replica_address(self, broker_id: int) -> tuple[str, int] | None:
        if broker_id in self._link_overrides:
            return self._link_overrides[broker_id]
        b = self.image.brokers.get(broker_id)
        return (b.repl_host, b.repl_port) if b is not None else None

    # -- lifecycle (BrokerLifecycleManager) -------------------------------------------------------------------

    def advertised(self) -> tuple[str, int]:
        adv = self.config["advertised.listeners"]
        return parse_address(adv) if adv else (self.host, self.port)

    async def start(self, host: str, port: int, ready_timeout: float = 60.0) -> int:
        """Take the port, join the cluster, wait until unfenced and our own image says so, then listen; returns the
        bound port.

        Kafka's ``BrokerServer.startup`` enables request processing only after the broker caught up with the
        metadata and was unfenced, so no client ever sees a Metadata answer with 0 brokers and controller -1 (which
        librdkafka's AdminClient waits on until it times out). Here the port refuses connections until then; peers
        do not need it earlier (they fetch from us only once we lead, which needs us unfenced)."""
        self.port = await self.server.bind(host, port)
        self.host = host
        self.incarnation = uuid.UUID(int=self.rng.getrandbits(128))
        try:
            await asyncio.wait_for(self._register(), ready_timeout)
            loop = asyncio.get_running_loop()
            self._tasks = [loop.create_task(self._metadata_loop(), name="metadata"),
                           loop.create_task(self._heartbeat_loop(), name="heartbeat")]
            if self.data_dir is not None:
                self._tasks.append(loop.create_task(self._flush_loop(), name="flush"))
            self.replicas.start()
            self.txn.start()
            await asyncio.wait_for(self._unfenced.wait(), ready_timeout)
            await asyncio.wait_for(self._live_in_image.wait(), ready_timeout)
        except TimeoutError:
            raise NodeStartError(f"broker {self.node_id}: not unfenced by the controller at "
                                 f"{self.controller_address[0]}:{self.controller_address[1]} within "
                                 f"{ready_timeout:.0f} s") from None
        await self.server.open()
        return self.port

    async def _register(self) -> None:
        host, port = self.advertised()
        last = None
        while True:
            req = BrokerRegistrationRequest(broker_id=self.node_id, cluster_id=self.cluster_id,
                                            incarnation_id=self.incarnation, host=host, port=port,
                                            replication_host=self.host, replication_port=self.port, rack=None,
                                            previous_broker_epoch=self.previous_broker_epoch)
            try:
                resp = await self._links["heartbeat"].request(req, 0, timeout=5.0)
                if resp.error_code == 0:
                    self.broker_epoch = resp.broker_epoch
                    log.info("broker %d registered with epoch %d", self.node_id, self.broker_epoch)
                    return
                if resp.error_code == NOT_CONTROLLER:
                    last = "no active controller (the quorum is electing one)"
                elif resp.error_code != DUPLICATE_BROKER_REGISTRATION:
                    raise NodeStartError(f"broker {self.node_id}: registration refused with error "
                                         f"{resp.error_code} ({E.for_code(resp.error_code).__name__})")
                else:
                    last = "a previous incarnation's session is still live"
            except (OSError, TimeoutError, E.KafkaError) as e:
                last = f"controller unreachable: {e}"
            log.info("broker %d: registration retry (%s)", self.node_id, last)
            await self.clock.sleep(0.2)

    async def _heartbeat_loop(self) -> None:
        interval = self.config["broker.heartbeat.interval.ms"] / 1000
        while True:
            req = BrokerHeartbeatRequest(broker_id=self.node_id, broker_epoch=self.broker_epoch,
                                         current_metadata_offset=self.image.offset + 1, want_fence=False,
                                         want_shut_down=False)
            try:
                resp = await self._links["heartbeat"].request(req, 0, timeout=max(interval, 2.0))
                if resp.error_code == STALE_BROKER_EPOCH:
                    log.warning("broker %d: stale broker epoch; registering again", self.node_id)
                    await self._register()
                elif resp.error_code == 0:
                    self.fenced = resp.is_fenced
                    if not self.fenced:
                        self._unfenced.set()
            except (OSError, TimeoutError, E.KafkaError) as e:
                log.debug("broker %d: heartbeat failed: %s", self.node_id, e)
            await self.clock.sleep(min(interval, 0.1) if self.fenced else interval)

    async def _metadata_loop(self) -> None:
        """Replicate the metadata log from the controller and publish each batch of changes (MetadataPublisher)."""
        T = FetchRequest.FetchTopic
        while True:
            req = FetchRequest(replica_id=self.node_id, max_wait_ms=500, min_bytes=1, max_bytes=8 << 20,
                               isolation_level=0, session_id=0, session_epoch=-1, topics=[T(topic=METADATA_TOPIC,
                               partitions=[T.FetchPartition(partition=0, current_leader_epoch=-1,
                                                            fetch_offset=self.image.offset + 1, last_fetched_epoch=-1,
                                                            log_start_offset=-1, partition_max_bytes=8 << 20)])],
                               forgotten_topics_data=[], rack_id="")
            try:
                # a quorum: give up on a silent (e.g. paused) controller after max wait + Kafka's request timeout
                resp = await self._links["metadata"].request(req, 12, timeout=10.0 if len(
                    self.controllers.addresses) == 1 else 0.5 + self.config["controller.quorum.request.timeout.ms"] / 1000)
            except (OSError, TimeoutError, E.KafkaError) as e:
                log.debug("broker %d: metadata fetch failed: %s", self.node_id, e)
                await self.clock.sleep(0.2)
                continue
            pd = resp.responses[0].partitions[0]
            if pd.error_code or not pd.records:
                if pd.error_code:
                    await self.clock.sleep(0.2)
                continue
            try:
                self.publish(bytes(pd.records))
            except Exception:   # a bug in applying must be loud, and must not stop replication of metadata
                log.exception("broker %d: applying metadata failed", self.node_id)
                await self.clock.sleep(0.2)

    def publish(self, data: bytes) -> None:
        delta = Delta()
        for offset, rec in decode_batches(data):
            self.image.apply(offset, rec, delta)
        if delta:
            self.replicas.apply_delta(self.image, delta)
        if delta.configs:
            self.replicas.apply_configs(self.image)
        me = self.image.brokers.get(self.node_id)
        if me is not None and not me.fenced and me.epoch == self.broker_epoch:   # this incarnation, not an old one
            self._live_in_image.set()

    async def _flush_loop(self) -> None:
        """Kafka's log flusher: every log.flush.scheduler.interval.ms, flush logs whose flush.ms is due."""
        interval = self.config["log.flush.scheduler.interval.ms"] / 1000
        while True:
            await self.clock.sleep(interval)
            self.replicas.maybe_flush()

    async def controlled_shutdown(self, timeout: float | None = None) -> bool:
        """BrokerLifecycleManager.beginControlledShutdown: heartbeat WantShutDown until the controller grants it.

        The controller first moves our leaderships and takes us out of every ISR while we stay registered and
        unfenced (in controlled shutdown), and grants the shutdown once every active broker applied that; we keep
        serving and replicating meanwhile, so clients fail over before the process goes. Gives up after
        ``timeout`` (default broker.session.timeout.ms: by then a broker holding it up would be fenced anyway).
        Returns whether it was granted."""
        timeout = self.config["broker.session.timeout.ms"] / 1000 if timeout is None else timeout
        deadline = self.clock.monotonic() + timeout
        while self.clock.monotonic() < deadline:
            req = BrokerHeartbeatRequest(broker_id=self.node_id, broker_epoch=self.broker_epoch,
                                         current_metadata_offset=self.image.offset + 1, want_fence=False,
                                         want_shut_down=True)
            try:
                resp = await self._links["rpc"].request(req, 0, timeout=max(0.5, deadline - self.clock.monotonic()))
                if resp.error_code == 0 and resp.should_shut_down:
                    return True
                if resp.error_code and resp.error_code != NOT_CONTROLLER:   # NOT_CONTROLLER: ask again
                    log.warning("broker %d: controlled shutdown refused with error %d", self.node_id,
                                resp.error_code)
                    return False
            except (OSError, TimeoutError, E.KafkaError) as e:
                log.debug("broker %d: controlled shutdown heartbeat failed: %s", self.node_id, e)
            await self.clock.sleep(0.1)
        log.warning("broker %d: controlled shutdown not granted within %.0f s", self.node_id, timeout)
        return False

    async def stop(self) -> None:
        await cancel_and_wait(self._tasks)
        await self.txn.close()
        await self.markers.close()
        await self.groups.close()
        await self.fetchers.stop()
        await self.server.stop()
        for link in [*self._links.values(), *self._peer_links.values()]:
            await link.close()
        self.replicas.close()
        self._write_clean_shutdown_marker()      # only a stop that got here is clean (kill -9 never does)


__all__ = ["BrokerNode", "DataDirError", "NodeStartError", "parse_address"]
