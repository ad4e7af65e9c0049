"""QuorumController: the single writer of the cluster metadata log (KRaft's active controller).

Everything the cluster agrees on goes through here as metadata records (metadata/records.py), appended to a
durable log and applied to the controller's own MetadataImage; brokers fetch the same records and apply them to
theirs. Names and rules follow Apache Kafka's ``QuorumController``, ``ClusterControlManager`` (registration,
heartbeats, fencing; KIP-631) and ``ReplicationControlManager`` / ``PartitionChangeBuilder`` (topics, ISR changes
by AlterPartition with partition-epoch checks, KIP-497; leader elections from the ISR, or with the ISR empty from the
eligible leader replicas (KIP-966, when eligible.leader.replicas.version ≥ 1: :meth:`QuorumController._build`);
unclean election only when ``unclean.leader.election.enable``) and ``FeatureControlManager`` (feature levels
finalized in the log at format time and by UpdateFeatures, KIP-584).

Two ways to run. Alone (no controller.quorum.voters): the single writer of a durable Log, replayed at start.
In a quorum (controller.quorum.voters, KIP-595): the metadata log is Raft's (controller/quorum.py); only the Raft
leader is the active controller, and only once the records of earlier epochs are committed and applied (Kafka's
QuorumController claims leadership after replaying up to its epoch's start). The active controller applies its own
records to its image as it appends them (Kafka's uncommitted in-memory state) and answers requests only once Raft
committed them (``wait_committed``); every controller applies what Raft commits (``handle_commit``). A controller
that loses leadership rebuilds its image from the committed records, so a deposed leader's uncommitted records
(which Raft truncates) are never applied; requests to a non-active controller answer NOT_CONTROLLER.
Threading rule: runs on one event loop; time from the Clock.
"""
from __future__ import annotations

import asyncio
import logging
import random
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from kafka import errors as E

from ..clock import Clock
from ..config import BrokerConfig
from ..datadir import DataDirError
from ..features import ELR_VERSION, bootstrap_levels
from ..features import supported as supported_features
from ..log.base import Log
from ..metadata.image import MetadataImage, PartitionState, TopicImage, partition_record
from ..metadata.records import NO_LEADER, decode_batches, encode_batch
from ..topic_config import config_error, topic_name_error, topic_setting
from .placement import place

log = logging.getLogger("reference_broker.controller")

NOT_CONTROLLER = E.NotControllerError.errno
STALE_BROKER_EPOCH = E.StaleBrokerEpochError.errno
ELECTION_NOT_NEEDED = E.ElectionNotNeededError.errno
PREFERRED_LEADER_NOT_AVAILABLE = E.PreferredLeaderNotAvailableError.errno
ELIGIBLE_LEADERS_NOT_AVAILABLE = E.EligibleLeadersNotAvailableError.errno
INVALID_UPDATE_VERSION = E.InvalidUpdateVersionError.errno
UNKNOWN_TOPIC_ID = E.UnknownTopicIdError.errno
DUPLICATE_BROKER_REGISTRATION = E.DuplicateBrokerRegistrationError.errno
INCONSISTENT_CLUSTER_ID = E.InconsistentClusterIdError.errno
INELIGIBLE_REPLICA = E.IneligibleReplicaError.errno
PREFERRED, UNCLEAN = 0, 1
ONLINE = 2          # PartitionChangeBuilder.Election.ONLINE: elect from the ISR (or the ELR) only
# the topic configs known before every Kafka topic config was (test-only switch topics.nine_configs_only)
NINE_CONFIGS = frozenset({"min.insync.replicas", "max.message.bytes", "segment.bytes", "unclean.leader.election.enable",
                          "cleanup.policy", "retention.ms", "retention.bytes", "message.timestamp.type",
                          "compression.type"})


@dataclass
class HeartbeatResult:
    error: int
    is_caught_up: bool = False
    is_fenced: bool = True
    should_shut_down: bool = False


class QuorumController:
    def __init__(self, config: BrokerConfig, metadata_log: Log, clock: Clock, rng: random.Random,
                 faults=None, quorum: bool = False) -> None:
        self.config = config
        self.log = metadata_log
        self.clock = clock
        self.rng = rng
        self.faults = faults
        self.image = MetadataImage()
        self.session_deadline: dict[int, float] = {}     # broker id -> monotonic deadline (live sessions only)
        self.shutdown_offset: dict[int, int] = {}         # broker id -> metadata offset its controlled shutdown needs
        self.heard_from: set[int] = set()                 # brokers that registered or heartbeat since we started
        self.applied_by: dict[int, int] = {}              # broker id -> metadata offset it has applied
        self._waiters: list[tuple[Callable[[], bool], asyncio.Future]] = []
        self._listeners: list[Callable[[], None]] = []
        self._ticker: object | None = None
        # the quorum (None when alone): set by attach_raft; the image then comes from handle_commit, not _replay
        self.raft = None
        self.active = not quorum              # alone: always the active controller
        self.committed_offset = 0             # quorum: the offset below which records are committed and applied
        self.leader_epoch = -1
        self.leader_id: int | None = None
        self._epoch_start: int | None = None  # quorum leader: the offset of its LeaderChange record
        self._commit_waiters: list[tuple[int, asyncio.Future]] = []
        # called each time this controller becomes active (quorum), e.g. to write records a new cluster needs once
        # (alone, such work runs at start: the single controller is always active)
        self.on_activate: list[Callable[[], None]] = []
        self.observers: dict[int, tuple[int, int]] = {}   # broker id -> (fetch offset, wall ms) (DescribeQuorum)
        self._followed = False                # has followed another leader (test switch no_activation_after_failover)
        if not quorum:
            self._replay()

    # -- the log ----------------------------------------------------------------------------------------------

    def _replay(self) -> None:
        offset = self.log.log_start_offset
        end = self.log.log_end_offset
        while offset < end:
            res = self.log.read(offset, 1 << 20, end, True)
            if not res.data:
                break
            try:
                for off, rec in decode_batches(res.data):
                    self.image.apply(off, rec)
                    offset = off + 1
            except (ValueError, KeyError, TypeError) as e:
                raise DataDirError(f"metadata log record at offset {offset} is unreadable "
                                   f"({type(e).__name__}: {e}); refusing to start") from None
        now = self.clock.monotonic()
        for b in self.image.brokers.values():   # a restarted controller gives every live broker a fresh session
            if not b.fenced:
                self.session_deadline[b.broker_id] = now + self._session_s()

    def _rearm_sessions(self) -> None:
        now = self.clock.monotonic()
        for b in self.image.brokers.values():   # a new or restarted controller gives every live broker a session
            if not b.fenced:
                self.session_deadline[b.broker_id] = now + self._session_s()

    @property
    def end_offset(self) -> int:
        """The metadata log end offset: a broker that applied everything below it is caught up (in a quorum: the
        committed offset, all a broker can fetch)."""
        if self.raft is not None:
            return self.committed_offset
        return self.log.log_end_offset

    # -- the quorum (KIP-595): leadership and commits from Raft ------------------------------------------------

    def attach_raft(self, raft) -> None:
        """Run on the Raft quorum ``raft`` (controller/quorum.RaftDriver), whose listener this controller is."""
        self.raft = raft
        raft.on_poll = self._maybe_activate

    def handle_leader_change(self, epoch: int, leader_id: int | None) -> None:
        """Raft's listener: a new epoch or leader. Losing leadership deactivates at once (the image falls back to
        the committed records); gaining it activates once this epoch's LeaderChange record is applied."""
        self.leader_epoch, self.leader_id = epoch, leader_id
        me = self.config["node.id"]
        self._followed = self._followed or leader_id not in (None, me)   # (quorum.no_activation_after_failover)
        if leader_id == me and self.raft is not None:
            st = self.raft.client.state
            self._epoch_start = getattr(st, "epoch_start_offset", None)
        elif leader_id == me:       # called from inside the client's constructor, before attach_raft
            self._epoch_start = None
        else:
            self._epoch_start = None
            if self.active and self.raft is not None:
                self._deactivate()
            elif self.faults is not None and self.faults.on("quorum.follower_acts_active") and self.raft is not None:
                self.active = True

    def handle_commit(self, entries) -> None:
        """Raft's listener: records below the high watermark, once each, in order. Records this active controller
        appended are in its image already (MetadataImage.apply ignores offsets it applied)."""
        for e in entries:
            self.image.apply(e.offset, e.data)
            self.committed_offset = e.offset + 1
        for fn in list(self._listeners):
            fn()
        self._check_waiters()
        still = []
        for off, fut in self._commit_waiters:
            if fut.done():
                continue
            if self.committed_offset >= off:
                fut.set_result(True)
            else:
                still.append((off, fut))
        self._commit_waiters = still
        self._maybe_activate()

    def _maybe_activate(self) -> None:
        if self.active or self.raft is None or self.leader_id != self.config["node.id"]:
            return
        if self._epoch_start is None:
            st = self.raft.client.state
            self._epoch_start = getattr(st, "epoch_start_offset", None)
            if self._epoch_start is None:
                return
        if self.committed_offset <= self._epoch_start:
            return
        if self.faults is not None and self.faults.on("quorum.no_activation_after_failover") and self._followed:
            return
        log.warning("controller %d: active in epoch %d from committed offset %d", self.config["node.id"],
                    self.leader_epoch, self.committed_offset)
        self.session_deadline.clear()
        self.heard_from.clear()
        self.shutdown_offset.clear()
        if not (self.faults is not None and self.faults.on("quorum.no_session_rearm")):
            self._rearm_sessions()
        self.active = True
        for fn in list(self.on_activate):
            fn()

    def _deactivate(self) -> None:
        """No longer leader: forget sessions, fail waiters, and rebuild the image from committed records only."""
        log.warning("controller %d: no longer active (epoch %d, leader %s)", self.config["node.id"],
                    self.leader_epoch, self.leader_id)
        self.active = False
        self.session_deadline.clear()
        self.shutdown_offset.clear()
        self.heard_from.clear()
        for _off, fut in self._commit_waiters:
            if not fut.done():
                fut.set_result(False)
        self._commit_waiters = []
        image = MetadataImage()
        for e in self.raft.log.read(0, self.committed_offset):
            image.apply(e.offset, e.data)
        # the same object, rebuilt: others keep a reference to the controller's image (e.g. dynamic configs)
        self.image.__dict__.clear()
        self.image.__dict__.update(image.__dict__)

    async def wait_committed(self, offset: int | None = None, timeout_s: float = 30.0) -> bool:
        """Wait until Raft committed every record this controller appended so far (or ``offset``): True, or False
        when leadership was lost first (the caller answers NOT_CONTROLLER) or the time ran out. Alone: True."""
        if self.raft is None:
            return True
        if offset is None:
            offset = self.image.offset + 1
        if self.committed_offset >= offset:
            return True
        if not self.active:
            return False
        fut = asyncio.get_running_loop().create_future()
        self._commit_waiters.append((offset, fut))
        try:
            async with asyncio.timeout(timeout_s):
                return await fut
        except TimeoutError:
            return False

    def _commit(self, records: list[dict]) -> int:
        """Append records durably, apply them, wake metadata fetchers; returns the offset after the last one.
        In a quorum: append through Raft and apply to the (uncommitted) image now; commit comes later."""
        if not records:
            return self.end_offset
        if self.raft is not None:
            if not self.active:
                raise E.NotControllerError(f"controller {self.config['node.id']} is not the active controller")
            if self.leader_id != self.config["node.id"]:      # fault quorum.follower_acts_active: split brain
                for rec in records:
                    self.image.apply(self.image.offset + 1, rec)
                return self.image.offset + 1
            for rec in records:
                off = self.raft.next_offset()
                if rec["type"] == "register_broker":
                    rec["epoch"] = off   # Kafka: the broker epoch is the offset of the registration record
                off = self.raft.append(rec)
                self.image.apply(off, rec)
            return off + 1
        base = self.log.log_end_offset
        for i, rec in enumerate(records):
            if rec["type"] == "register_broker":
                rec["epoch"] = base + i      # Kafka: the broker epoch is the offset of the registration record
        info = self.log.append(encode_batch(records, self.clock.wall_ms()), 0)
        self.log.flush()
        for i, rec in enumerate(records):
            self.image.apply(info.base_offset + i, rec)
        for fn in list(self._listeners):
            fn()
        self._check_waiters()
        return self.end_offset

    def add_listener(self, fn: Callable[[], None]) -> None:
        """``fn`` is called after every commit (parked metadata fetches use it)."""
        self._listeners.append(fn)

    def remove_listener(self, fn: Callable[[], None]) -> None:
        if fn in self._listeners:
            self._listeners.remove(fn)

    def read_records(self, offset: int, max_bytes: int) -> bytes:
        """Records from ``offset`` for a broker's metadata fetch (in a quorum: committed records only)."""
        end = self.end_offset
        if offset >= end or offset < self.log.log_start_offset:
            return b""
        return self.log.read(offset, max_bytes, end, True).data

    # -- waiting for brokers to apply -------------------------------------------------------------------------

    def note_applied(self, broker_id: int, offset: int) -> None:
        """A broker fetched the metadata log from ``offset``: it has applied every record below it."""
        if offset > self.applied_by.get(broker_id, -1):
            self.applied_by[broker_id] = offset
            self._check_waiters()

    def _check_waiters(self) -> None:
        still = []
        for cond, fut in self._waiters:
            if fut.done():
                continue
            if cond():
                fut.set_result(True)
            else:
                still.append((cond, fut))
        self._waiters = still

    async def wait_applied(self, offset: int, timeout_s: float) -> bool:
        """Wait until every live broker has applied the log up to ``offset`` (or the time is up).

        Deliberate difference (GAPS.md): Kafka answers CreateTopics once the records are committed; the reference
        controller also waits (boundedly) for live brokers to apply them, so a client that produces right after
        CreateTopics does not depend on metadata propagation races."""
        def cond() -> bool:
            return all(self.applied_by.get(b.broker_id, -1) >= offset for b in self.image.live_brokers())
        if cond():
            return True
        fut = asyncio.get_running_loop().create_future()
        self._waiters.append((cond, fut))
        try:
            await asyncio.wait_for(fut, timeout_s)
            return True
        except TimeoutError:
            return False

    # -- brokers: registration, heartbeats, fencing (ClusterControlManager, KIP-631) --------------------------

    def _session_s(self) -> float:
        return self.config["broker.session.timeout.ms"] / 1000

    def register_broker(self, broker_id: int, cluster_id: str, incarnation: str, host: str, port: int,
                        repl_host: str, repl_port: int, rack: str | None,
                        previous_broker_epoch: int = -1) -> tuple[int, int]:
        """(error, broker epoch). A different incarnation while the old one's session is live is refused
        (DUPLICATE_BROKER_REGISTRATION) until that session expires, as Kafka does; the new one starts fenced."""
        if cluster_id != self.config["cluster.id"]:
            return INCONSISTENT_CLUSTER_ID, -1
        old = self.image.brokers.get(broker_id)
        if (old is not None and old.incarnation != incarnation and broker_id in self.session_deadline
                and broker_id in self.heard_from):
            # Another incarnation heartbeats to us: refuse until its session expires. One we never heard from
            # since our own (re)start is taken to be gone (e.g. a combined node killed with its controller).
            return DUPLICATE_BROKER_REGISTRATION, -1
        self.heard_from.add(broker_id)
        if old is not None and old.incarnation == incarnation:
            return 0, old.epoch
        if old is not None and not old.fenced:
            self._commit(self._fence_records(broker_id))
        clean = old is not None and old.epoch == previous_broker_epoch
        if old is not None and self.image.elr_enabled and not clean:
            # Kafka 4.4.0 (ClusterControlManager.registerBroker → handleBrokerUncleanShutdown): a new incarnation
            # whose previous broker epoch (from its clean shutdown marker) is not the registered one may have lost
            # acknowledged records: it leaves every ISR and ELR.
            self._commit(self._unclean_shutdown_records(broker_id))
        elif old is not None:
            self._commit(self._leave_records(broker_id))       # handleBrokerShutdown: out of every ISR
        records: list[dict] = [{"type": "register_broker", "broker_id": broker_id, "incarnation": incarnation,
                        "host": host, "port": port, "repl_host": repl_host, "repl_port": repl_port, "rack": rack,
                        "epoch": -1}]
        self._commit(records)
        self.shutdown_offset.pop(broker_id, None)
        self.session_deadline[broker_id] = self.clock.monotonic() + self._session_s()
        return 0, self.image.brokers[broker_id].epoch

    def heartbeat(self, broker_id: int, broker_epoch: int, metadata_offset: int, want_fence: bool,
                  want_shut_down: bool) -> HeartbeatResult:
        b = self.image.brokers.get(broker_id)
        if b is None or b.epoch != broker_epoch:
            return HeartbeatResult(STALE_BROKER_EPOCH)
        self.heard_from.add(broker_id)
        self.note_applied(broker_id, metadata_offset)
        caught_up = metadata_offset >= self.end_offset
        if broker_id in self.shutdown_offset and not b.fenced:
            # In controlled shutdown (BrokerHeartbeatManager.calculateNextBrokerState, CONTROLLED_SHUTDOWN): granted
            # once it leads nothing and every active broker applied the log past its shutdown offset.
            self.session_deadline[broker_id] = self.clock.monotonic() + self._session_s()
            if not self._may_shut_down(broker_id):
                return HeartbeatResult(0, caught_up, False, False)
            want_shut_down = want_fence = True       # SHUTDOWN_NOW, whatever this heartbeat asked
        if want_shut_down:
            if b.fenced or want_fence or not self._leads_any(broker_id):
                # SHUTDOWN_NOW: fenced already, asked to be fenced, or nothing to move first
                if not b.fenced:
                    self._commit(self._fence_records(broker_id))
                self.session_deadline.pop(broker_id, None)
                self.shutdown_offset.pop(broker_id, None)
                return HeartbeatResult(0, caught_up, True, True)
            # CONTROLLED_SHUTDOWN (ReplicationControlManager.handleBrokerInControlledShutdown): still registered and
            # unfenced, but no longer eligible; its leaderships move and it leaves every ISR now, so clients fail
            # over while it still serves, and it may go once the brokers have applied that.
            self.shutdown_offset[broker_id] = self._commit(self._shutdown_records(broker_id))
            self.session_deadline[broker_id] = self.clock.monotonic() + self._session_s()
            return HeartbeatResult(0, caught_up, False, False)
        self.session_deadline[broker_id] = self.clock.monotonic() + self._session_s()
        if b.fenced and not want_fence and metadata_offset > b.epoch:
            self._commit([{"type": "unfence_broker", "broker_id": broker_id, "epoch": b.epoch}])
            self._commit(self._elections_for_unfenced(broker_id))
        elif not b.fenced and want_fence:
            self._commit(self._fence_records(broker_id))
        return HeartbeatResult(0, caught_up, self.image.brokers[broker_id].fenced, False)

    def _leads_any(self, broker_id: int) -> bool:
        return any(st.leader == broker_id for t in self.image.topics.values() for st in t.partitions)

    def _may_shut_down(self, broker_id: int) -> bool:
        """BrokerHeartbeatManager: no leaderships left, and the lowest metadata offset applied by an active broker
        is at or past the broker's controlled shutdown offset."""
        if self._leads_any(broker_id):
            return False
        offset = self.shutdown_offset[broker_id]
        return all(self.applied_by.get(b.broker_id, -1) >= offset for b in self.image.active_brokers())

    def expire_sessions(self) -> list[int]:
        """Fence every broker whose heartbeats stopped for broker.session.timeout.ms; returns their ids."""
        now = self.clock.monotonic()
        expired = [bid for bid, deadline in sorted(self.session_deadline.items()) if deadline <= now]
        for bid in expired:
            del self.session_deadline[bid]
            self.shutdown_offset.pop(bid, None)
            b = self.image.brokers.get(bid)
            if b is not None and not b.fenced:
                log.warning("broker %d: session expired; fencing it and moving its leaderships", bid)
                self._commit(self._fence_records(bid))
        return expired

    def bootstrap_features(self) -> None:
        """Finalize the cluster's feature levels once, as ``kafka-storage format`` does (FeatureLevelRecords at the
        start of the metadata log); a log that already holds feature records is left as it is."""
        if self.image.features_offset >= 0:
            return
        self._commit([{"type": "feature_level", "name": name, "level": level}
                      for name, level in bootstrap_levels(self.config).items()])

    def update_features(self, updates: list[tuple[str, int, int]], validate_only: bool) -> tuple[int, str | None]:
        """FeatureControlManager.updateFeatures: (feature, level, upgrade type) each, checked in order; the first
        failure fails the whole request (INVALID_UPDATE_VERSION, Kafka's message); else the levels are committed
        (unless ``validate_only``). Turning eligible.leader.replicas.version off clears every partition's ELR and
        LastKnownElr (Kafka: ClearElrRecord). Feature dependencies on metadata.version are not checked (GAPS.md)."""
        supported = supported_features()
        records: list[dict] = []
        for name, level, kind in updates:
            why = None
            current = self.image.feature(name)
            lo, hi = supported.get(name, (0, 0))
            if kind not in (1, 2, 3):
                why = "The controller does not support the given upgrade type."
            elif level < 0:
                why = "A feature version cannot be less than 0."
            elif not lo <= level <= hi:
                who = f"Local controller {self.config['node.id']}"
                why = (f"{who} does not support this feature." if hi == 0 else
                       f"{who} only supports versions {lo if lo == hi else f'{lo}-{hi}'}")
            elif level < current and kind == 1 and not (self.faults is not None
                                                         and self.faults.on("features.downgrade_as_upgrade")):
                why = ("Can't downgrade the version of this feature without setting the upgrade type to either safe "
                       "or unsafe downgrade.")
            elif level > current and kind != 1:
                why = "Can't downgrade to a newer version."
            if why is not None:
                return INVALID_UPDATE_VERSION, ("The update failed for all features since the following feature had "
                                                f"an error: Invalid update version {level} for feature {name}. {why}")
            records.append({"type": "feature_level", "name": name, "level": level})
        if validate_only:
            return 0, None
        self._commit(records)
        if self.image.feature(ELR_VERSION) < 1:
            cleared = []
            for t in self.image.topics.values():
                for st in t.partitions:
                    if st.elr or st.last_known_elr:
                        rec = self._record(st, st.leader, list(st.isr), [], [])
                        if rec is not None:
                            cleared.append(rec)
            self._commit(cleared)
        return 0, None

    def start_ticker(self) -> None:
        """Check sessions periodically through the clock, and every unclean.leader.election.interval.ms elect
        leaders uncleanly for leaderless partitions that allow it (QuorumController's electUnclean task)."""
        interval = max(0.05, min(0.25, self._session_s() / 10,
                                 int(self.config["unclean.leader.election.interval.ms"]) / 1000))

        unclean_s = max(0.001, int(self.config["unclean.leader.election.interval.ms"]) / 1000)
        next_unclean = [self.clock.monotonic() + unclean_s]

        def tick() -> None:
            try:
                if not self.active:
                    return          # a quorum's inactive controller fences nobody and elects nothing
                self.expire_sessions()
                if self.clock.monotonic() >= next_unclean[0]:      # Kafka's periodic electUnclean task
                    next_unclean[0] = self.clock.monotonic() + unclean_s
                    self._commit(self._unclean_elections())
            finally:
                self._ticker = self.clock.call_later(interval, tick)
        self._ticker = self.clock.call_later(interval, tick)

    def stop(self) -> None:
        if self._ticker is not None:
            self._ticker.cancel()
            self._ticker = None

    # -- elections (PartitionChangeBuilder) -------------------------------------------------------------------

    def _unclean_allowed(self, t: TopicImage) -> bool:
        return bool(topic_setting(t.configs, self.config, "unclean.leader.election.enable"))

    def _min_isr(self, t: TopicImage) -> int:
        """ReplicationControlManager.getTopicEffectiveMinIsr: min.insync.replicas, at most the replication factor."""
        return min(int(topic_setting(t.configs, self.config, "min.insync.replicas")), t.replication_factor or 1)

    def _change(self, st: PartitionState, *, leader: int | None = None, isr: list[int] | None = None) -> dict | None:
        """A partition_change record setting exactly ``leader`` / ``isr`` (None: unchanged), or None when nothing
        changes; leader changes bump the leader epoch. Used where the caller already chose the leader (preferred
        election); ELR fields follow the ISR as :meth:`_build` keeps them."""
        new_leader = st.leader if leader is None else leader
        new_isr = list(st.isr) if isr is None else list(isr)
        if new_leader == st.leader and new_isr == st.isr:
            return None
        elr, lke = list(st.elr), list(st.last_known_elr)
        t = self.image.topics_by_id[st.topic_id]
        if len(new_isr) >= self._min_isr(t) or not self.image.elr_enabled:
            elr, lke = [], []
        elr = [r for r in elr if r not in new_isr]
        if new_leader >= 0 and st.leader < 0:
            lke = []
        return self._record(st, new_leader, new_isr, elr, lke)

    def _record(self, st: PartitionState, leader: int, isr: list[int], elr: list[int], lke: list[int]) -> dict | None:
        if leader == st.leader and isr == st.isr and elr == st.elr and lke == st.last_known_elr:
            return None
        nxt = PartitionState(st.topic, st.topic_id, st.index, st.replicas, list(isr), leader,
                             st.leader_epoch + (1 if leader != st.leader else 0), st.partition_epoch + 1,
                             list(elr), list(lke))
        return partition_record(nxt)

    def _build(self, st: PartitionState, *, target_isr: list[int] | None = None, election: int = ONLINE,
               remove: int = NO_LEADER, add: int = NO_LEADER, unclean_shutdown: int = NO_LEADER) -> dict | None:
        """The partition change Kafka's PartitionChangeBuilder makes (4.4.0, ELR per eligible.leader.replicas.version),
        or None when nothing changes.

        - ELR (KIP-966, when enabled): with the target ISR below the effective min ISR, the replicas leaving the ISR
          (and the ELR already there) form the ELR, less a broker that shut down uncleanly; at or above min ISR the
          ELR is empty. The ISR may then become empty (without ELR it keeps its last member).
        - Election: the current leader stays if it is in the target ISR and acceptable; else the first acceptable
          replica in replica order that is in the target ISR — or, with the ISR empty, in the ELR (a clean election:
          the ISR becomes that replica alone and it leaves the ELR); else the last known leader (LastKnownElr, one
          member) when ISR and ELR are both empty and it is acceptable ("balanced recovery", written as an unclean
          election); else, for UNCLEAN, any acceptable replica (ISR = it, ELR cleared); else no leader.
        - LastKnownElr holds the leader the partition had when it first became leaderless; cleared once it leads.
        Acceptable = active (unfenced, not shutting down) or ``add``, never ``remove`` or ``unclean_shutdown``."""
        t = self.image.topics_by_id[st.topic_id]
        elr_on = self.image.elr_enabled
        if self.faults is not None and self.faults.on("elr.disabled"):
            elr_on = False
        min_isr = self._min_isr(t)
        isr = list(st.isr) if target_isr is None else list(target_isr)
        elr, lke = list(st.elr), list(st.last_known_elr)

        def acceptable(r: int) -> bool:
            return r not in (remove, unclean_shutdown) and (r == add or self.image.is_active(r))

        if elr_on:                                           # maybePopulateTargetElr
            if len(isr) >= min_isr:
                elr, lke = [], []
            else:
                cand = set(elr) | set(st.isr)
                elr = sorted(r for r in cand if r not in isr and r != unclean_shutdown)
        from_elr = not (self.faults is not None and self.faults.on("elr.no_election_from_elr"))

        def valid(r: int) -> bool:
            return (r in isr or (from_elr and not isr and r in elr)) and acceptable(r)

        def last_known_leader() -> int:
            if (elr_on and not elr and not isr and len(st.last_known_elr) == 1
                    and acceptable(st.last_known_elr[0])):
                return st.last_known_elr[0]
            return NO_LEADER

        unclean = False
        if election == PREFERRED and st.replicas and valid(st.replicas[0]):
            new = st.replicas[0]
        elif st.leader != NO_LEADER and valid(st.leader):
            new = st.leader
        else:
            new = next((r for r in st.replicas if valid(r)), NO_LEADER)
            if new == NO_LEADER:
                new = last_known_leader()
                unclean = new != NO_LEADER
            if new == NO_LEADER and election == UNCLEAN:
                new = next((r for r in st.replicas if acceptable(r)), NO_LEADER)
                unclean = new != NO_LEADER
        leader_changes = new != st.leader
        record_isr: list[int] | None = None
        if leader_changes:                                   # tryElection
            if new in elr:
                isr, elr = [new], [r for r in elr if r != new]
            elif unclean:
                log.warning("unclean election: %s-%d leader %d (ISR was %s, ELR %s)", st.topic, st.index, new,
                            st.isr, st.elr)
                record_isr = [new]
        if record_isr is not None or not elr_on:             # maybeUpdateRecordElr
            elr = []
        if record_isr is None and (isr or elr_on):
            record_isr = isr
        new_isr = list(st.isr) if record_isr is None else record_isr
        lke = list(st.last_known_elr)                        # maybeUpdateLastKnownLeader (last known leader mode)
        if elr_on:
            if leader_changes and new == NO_LEADER and not st.last_known_elr:
                lke = [st.leader]
            elif leader_changes and new >= 0 and st.last_known_elr:
                lke = []
        else:
            lke = []
        return self._record(st, new, new_isr, elr, lke)

    def _fence_records(self, broker_id: int) -> list[dict]:
        """Fence a broker: it leaves every ISR and its leaderships move (:meth:`_leave_records`)."""
        b = self.image.brokers[broker_id]
        return [{"type": "fence_broker", "broker_id": broker_id, "epoch": b.epoch}, *self._leave_records(broker_id)]

    def _shutdown_records(self, broker_id: int) -> list[dict]:
        """Enter controlled shutdown: still unfenced, but it leaves every ISR and its leaderships move."""
        b = self.image.brokers[broker_id]
        return [{"type": "controlled_shutdown", "broker_id": broker_id, "epoch": b.epoch},
                *self._leave_records(broker_id)]

    def _election_type(self, t: TopicImage) -> int:
        return UNCLEAN if self._unclean_allowed(t) else ONLINE

    def _leave_records(self, broker_id: int) -> list[dict]:
        """ReplicationControlManager.handleBrokerFenced / handleBrokerInControlledShutdown: the broker leaves every
        ISR it is in and its leaderships move (:meth:`_build` with it as the broker to remove); below min ISR it
        joins the ELR (KIP-966)."""
        records: list[dict] = []
        for t in self.image.topics.values():
            for st in t.partitions:
                if broker_id not in st.isr and st.leader != broker_id:
                    continue
                rec = self._build(st, target_isr=[r for r in st.isr if r != broker_id],
                                  election=self._election_type(t), remove=broker_id)
                if rec is not None:
                    records.append(rec)
        return records

    def _unclean_shutdown_records(self, broker_id: int) -> list[dict]:
        """ReplicationControlManager.handleBrokerUncleanShutdown (ELR on): a new incarnation registers without a
        clean shutdown behind it, so it may have lost acknowledged records: it leaves every ISR and ELR."""
        records: list[dict] = []
        for t in self.image.topics.values():
            for st in t.partitions:
                if broker_id not in st.isr and broker_id not in st.elr:
                    continue
                rec = self._build(st, target_isr=[r for r in st.isr if r != broker_id],
                                  election=self._election_type(t), unclean_shutdown=broker_id)
                if rec is not None:
                    records.append(rec)
        return records

    def _elections_for_unfenced(self, broker_id: int) -> list[dict]:
        """ReplicationControlManager.handleBrokerUnfenced: every leaderless partition is tried again with the broker
        acceptable (from the ISR, the ELR, the last known leader, or uncleanly where the topic allows)."""
        records = []
        for t in self.image.topics.values():
            for st in t.partitions:
                if st.leader == NO_LEADER:
                    rec = self._build(st, election=self._election_type(t), add=broker_id)
                    if rec is not None:
                        records.append(rec)
        return records

    def _unclean_elections(self) -> list[dict]:
        """Leaderless partitions of topics that allow unclean election take any live replica (data may be lost)."""
        records = []
        for t in self.image.topics.values():
            if not self._unclean_allowed(t):
                continue
            for st in t.partitions:
                if st.leader != NO_LEADER:
                    continue
                rec = self._build(st, election=UNCLEAN)
                if rec is not None:
                    records.append(rec)
        return records

    def elect_leaders(self, election_type: int, partitions: list[tuple[str, int]]) -> list[tuple[str, int, int, str | None]]:
        """ElectLeaders: (topic, partition, error, message) each; preferred = the first replica if live and in sync."""
        out = []
        records = []
        live = {x.broker_id for x in self.image.active_brokers()}
        for topic, idx in partitions:
            st = self.image.partition(topic, idx)
            if st is None:
                out.append((topic, idx, E.UnknownTopicOrPartitionError.errno, None))
                continue
            if election_type == PREFERRED:
                pref = st.replicas[0]
                if st.leader == pref:
                    out.append((topic, idx, ELECTION_NOT_NEEDED, "preferred replica is already the leader"))
                elif pref not in live or pref not in st.isr:
                    out.append((topic, idx, PREFERRED_LEADER_NOT_AVAILABLE,
                                f"preferred replica {pref} is not live and in sync"))
                else:
                    records.append(self._change(st, leader=pref))
                    out.append((topic, idx, 0, None))
            else:
                if st.leader != NO_LEADER:
                    out.append((topic, idx, ELECTION_NOT_NEEDED, "partition has a leader"))
                    continue
                rec = self._build(st, election=UNCLEAN)
                if rec is None or rec["leader"] == NO_LEADER:
                    out.append((topic, idx, ELIGIBLE_LEADERS_NOT_AVAILABLE, "no live replica"))
                else:
                    records.append(rec)
                    out.append((topic, idx, 0, None))
        self._commit([r for r in records if r is not None])
        return out

    # -- ISR changes from leaders (AlterPartition, KIP-497) ---------------------------------------------------

    def alter_partition(self, broker_id: int, broker_epoch: int, topic_id: uuid.UUID, index: int,
                        leader_epoch: int, partition_epoch: int, new_isr: list[int]) -> tuple[int, PartitionState | None]:
        """ReplicationControlManager.alterPartition / validateAlterPartitionData, in Kafka's order: the requesting
        broker's epoch (STALE_BROKER_EPOCH, which Kafka answers for the whole request: ``check_broker_epoch``);
        the topic id (UNKNOWN_TOPIC_ID) and partition (UNKNOWN_TOPIC_OR_PARTITION); a leader or partition epoch
        newer than ours (NOT_CONTROLLER: the request comes from a newer controller's world); an older leader epoch
        (FENCED_LEADER_EPOCH); a broker that is not the leader (INVALID_REQUEST); an older partition epoch
        (INVALID_UPDATE_VERSION); an ISR that names a non-replica or a replica twice, or lacks the leader
        (INVALID_REQUEST); an ISR member that is not registered, fenced or shutting down (INELIGIBLE_REPLICA).
        Returns (error, committed state); the state only with no error."""
        if self.check_broker_epoch(broker_id, broker_epoch):
            return STALE_BROKER_EPOCH, None
        t = self.image.topics_by_id.get(topic_id)
        if t is None:
            return UNKNOWN_TOPIC_ID, None
        if not 0 <= index < len(t.partitions):
            return E.UnknownTopicOrPartitionError.errno, None
        st = t.partitions[index]
        if leader_epoch > st.leader_epoch or partition_epoch > st.partition_epoch:
            return NOT_CONTROLLER, None
        if leader_epoch < st.leader_epoch:
            return E.FencedLeaderEpochError.errno, None
        if broker_id != st.leader:
            return E.InvalidRequestError.errno, None
        if partition_epoch < st.partition_epoch:
            return INVALID_UPDATE_VERSION, None
        if len(set(new_isr)) != len(new_isr) or any(r not in st.replicas for r in new_isr) or broker_id not in new_isr:
            return E.InvalidRequestError.errno, None
        if any(not self.image.is_active(r) for r in new_isr):
            return INELIGIBLE_REPLICA, None
        isr = [r for r in st.replicas if r in new_isr]
        rec = self._build(st, target_isr=isr, election=self._election_type(t))
        if rec is not None:
            self._commit([rec])
        return 0, self.image.partition(t.name, index)

    def check_broker_epoch(self, broker_id: int, broker_epoch: int) -> int:
        """ClusterControlManager.checkBrokerEpoch: STALE_BROKER_EPOCH unless ``broker_id`` is registered with
        ``broker_epoch``; else 0."""
        b = self.image.brokers.get(broker_id)
        return 0 if b is not None and b.epoch == broker_epoch else STALE_BROKER_EPOCH

    # -- topics (ReplicationControlManager.createTopics / deleteTopics) ---------------------------------------

    def create_topic(self, name: str, num_partitions: int, replication_factor: int, configs: dict[str, str],
                     validate_only: bool = False, internal: bool = False) -> tuple[int, str | None]:
        """CreateTopics' checks in Kafka's order; returns (error code, message)."""
        if num_partitions == -1:
            num_partitions = self.config["num.partitions"]
        if replication_factor == -1:
            replication_factor = self.config["default.replication.factor"]
        why = topic_name_error(name)
        if why:
            return E.InvalidTopicError.errno, why
        if name in self.image.topics:
            return E.TopicAlreadyExistsError.errno, f"Topic '{name}' already exists."
        if num_partitions <= 0:
            return E.InvalidPartitionsError.errno, "Number of partitions must be larger than 0."
        if replication_factor <= 0:
            return E.InvalidReplicationFactorError.errno, "Replication factor must be larger than 0."
        # ClusterControlManager.usableBrokers: registered and not in controlled shutdown, fenced ones included
        # (StripedReplicaPlacer puts replicas on them only when the unfenced ones are too few; leaders never).
        usable = [b for _, b in sorted(self.image.brokers.items()) if not b.in_controlled_shutdown]
        live = [b.broker_id for b in usable if not b.fenced]
        down = [b.broker_id for b in usable if b.fenced]
        if replication_factor > len(usable):
            return (E.InvalidReplicationFactorError.errno,
                    f"Unable to replicate the partition {replication_factor} time(s): The target replication "
                    f"factor of {replication_factor} cannot be reached because only {len(usable)} broker(s) are "
                    f"registered or some brokers have all their log directories cordoned.")   # Kafka 4.4's words
        if not live:
            return E.InvalidReplicationFactorError.errno, "All brokers are currently fenced."
        why = config_error(configs)
        if self.faults is not None and self.faults.on("topics.nine_configs_only"):
            why = why or next((f"Unknown topic config name: {k}" for k in configs if k not in NINE_CONFIGS), None)
        if why:
            return E.InvalidConfigurationError.errno, why
        if validate_only:
            return 0, None
        topic_id = uuid.UUID(int=self.rng.getrandbits(128))
        records: list[dict] = [{"type": "topic", "name": name, "topic_id": str(topic_id), "configs": dict(configs),
                                "internal": internal}]
        for i, replicas in enumerate(place(live, num_partitions, replication_factor, self.rng, down)):
            isr = [r for r in replicas if r in live]        # ReplicationControlManager: ISR = the active replicas
            records.append({"type": "partition", "topic_id": str(topic_id), "partition": i, "replicas": replicas,
                            "isr": isr, "leader": isr[0], "leader_epoch": 0, "partition_epoch": 0})
        self._commit(records)
        return 0, None

    def create_topic_assigned(self, name: str, num_partitions: int, replication_factor: int,
                              assignments: list[tuple[int, list[int]]], configs: dict[str, str],
                              validate_only: bool = False) -> tuple[int, str | None]:
        """CreateTopics with manual replica assignments, checked as ReplicationControlManager.createTopic does:
        partitions and replication factor must be -1; no partition twice; every replica list non-empty, of
        registered brokers, without repeats, all of one length; indexes 0..n-1; the ISR is the assigned brokers
        that are not fenced (none: INVALID_REPLICA_ASSIGNMENT) and the leader its first member."""
        why = topic_name_error(name)
        if why:
            return E.InvalidTopicError.errno, why
        if name in self.image.topics:
            return E.TopicAlreadyExistsError.errno, f"Topic '{name}' already exists."
        if replication_factor != -1:
            return (E.InvalidRequestError.errno,
                    "A manual partition assignment was specified, but replication factor was not set to -1.")
        if num_partitions != -1:
            return (E.InvalidRequestError.errno,
                    "A manual partition assignment was specified, but numPartitions was not set to -1.")
        bad = E.InvalidReplicationAssignmentError.errno
        parts: dict[int, tuple[list[int], list[int]]] = {}
        rf: int | None = None
        for index, replicas in assignments:
            if index in parts:
                return bad, f"Found multiple manual partition assignments for partition {index}"
            if not replicas:
                return bad, "The manual partition assignment includes an empty replica list."
            for b in sorted(replicas):
                if b not in self.image.brokers:
                    return bad, (f"The manual partition assignment includes broker {b}, but no such broker is "
                                 f"registered.")
            if len(set(replicas)) != len(replicas):
                return bad, "The manual partition assignment includes a broker more than once."
            if rf is not None and len(replicas) != rf:
                return bad, (f"The manual partition assignment includes a partition with {len(replicas)} "
                             f"replica(s), but this is not consistent with previous partitions, which have {rf} "
                             f"replica(s).")
            rf = len(replicas)
            isr = [b for b in replicas if not self.image.brokers[b].fenced]
            if not isr:
                return bad, (f"All brokers specified in the manual partition assignment for partition {index} "
                             f"are fenced or in controlled shutdown.")
            parts[index] = (list(replicas), isr)
        if sorted(parts) != list(range(len(parts))):
            return bad, "partitions should be a consecutive 0-based integer sequence"
        why = config_error(configs)
        if why:
            return E.InvalidConfigurationError.errno, why
        if validate_only:
            return 0, None
        topic_id = uuid.UUID(int=self.rng.getrandbits(128))
        records: list[dict] = [{"type": "topic", "name": name, "topic_id": str(topic_id), "configs": dict(configs),
                                "internal": False}]
        for i in range(len(parts)):
            replicas, isr = parts[i]
            records.append({"type": "partition", "topic_id": str(topic_id), "partition": i, "replicas": replicas,
                            "isr": isr, "leader": isr[0], "leader_epoch": 0, "partition_epoch": 0})
        self._commit(records)
        return 0, None

    def delete_topic(self, name: str) -> int:
        t = self.image.topics.get(name)
        if t is None:
            return E.UnknownTopicOrPartitionError.errno
        self._commit([{"type": "remove_topic", "topic_id": str(t.topic_id)}])
        return 0
