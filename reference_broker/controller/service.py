"""The controller as a network service: a QuorumController on its own listener, serving the CONTROLLER registry.

Runs inside the controller process (``python -m reference_broker controller``) or, for a single broker, in the
same process as that broker (KRaft's combined mode, ``process.roles=broker,controller``). With
controller.quorum.voters naming several controllers, it is one voter of a Raft quorum (controller/quorum.py): its
metadata log is Raft's, its election state in ``quorum-state`` beside it, and only the leader is active.
"""
from __future__ import annotations

import random
from pathlib import Path

from ..clock import Clock
from ..config import BrokerConfig, ConfigError
from ..datadir import prepare_data_dir
from ..log.base import Log
from ..log.memory import MemoryLog
from ..metadata.records import METADATA_TOPIC
from ..raft import FileQuorumStateStore, MemoryQuorumStateStore, QuorumStateStore
from ..registry import CONTROLLER
from ..server import Server
from .configs import ensure_cluster_defaults
from .quorum import KafkaMetadataLog, RaftDriver, parse_voters, raft_config
from .quorum_controller import QuorumController


def open_metadata_log(data_dir: Path | None, config: BrokerConfig, clock: Clock) -> Log:
    if data_dir is None:
        return MemoryLog()
    from ..log.file import FileLog, FileLogConfig

    return FileLog(data_dir / f"{METADATA_TOPIC}-0", FileLogConfig.from_broker_config(config), clock=clock)


class ControllerService:
    def __init__(self, config: BrokerConfig, data_dir: Path | None, clock: Clock, rng: random.Random,
                 faults=None) -> None:
        self.config = config
        self.clock = clock
        self.data_dir = data_dir
        if data_dir is not None:
            prepare_data_dir(data_dir)
        self.metadata_log = open_metadata_log(data_dir, config, clock)
        self.raft: RaftDriver | None = None
        voters = parse_voters(config["controller.quorum.voters"])
        if voters and config["node.id"] not in voters:
            raise ConfigError(f"node.id {config['node.id']} is not one of controller.quorum.voters "
                              f"{sorted(voters)} (observer controllers are not supported)")
        self.controller = QuorumController(config, self.metadata_log, clock, rng, faults, quorum=bool(voters))
        if voters:
            store: QuorumStateStore = (FileQuorumStateStore(str(data_dir / "quorum-state")) if data_dir is not None
                                       else MemoryQuorumStateStore())
            raft_faults = frozenset(f.removeprefix("raft.") for f in (faults.enabled if faults is not None else ())
                                    if f.startswith("raft."))
            self.raft = RaftDriver(raft_config(config, config["node.id"], tuple(sorted(voters)), raft_faults), voters,
                                   KafkaMetadataLog(self.metadata_log, clock), store, rng, clock, self.controller,
                                   config["cluster.id"])
            self.controller.attach_raft(self.raft)
        # the controller honours the cluster-default dynamic configs (unclean.leader.election.enable, ...); a broker
        # in the same process rebinds the shared config to its own image and id
        config.bind_dynamic(self.controller.image, -1)
        self.server = Server(self, CONTROLLER)
        self.host = "127.0.0.1"
        self.port = 0

    async def start(self, host: str, port: int) -> int:
        self.port = await self.server.start(host, port)
        self.host = host
        self.controller.start_ticker()
        c = self.controller
        if self.raft is None:
            c.bootstrap_features()
            ensure_cluster_defaults(c)
        else:
            # what `kafka-storage format` and a first start write (feature levels, the cluster-level
            # min.insync.replicas) goes through Raft: done by whichever voter becomes active first; each is a no-op
            # once the committed log holds it
            c.on_activate.append(c.bootstrap_features)
            c.on_activate.append(lambda: ensure_cluster_defaults(c))
            self.raft.start()
        return self.port

    async def stop(self) -> None:
        self.controller.stop()
        if self.raft is not None:
            await self.raft.stop(resign=True)     # graceful: EndQuorumEpoch, so a successor stands at once
        await self.server.stop()
        self.metadata_log.flush()
        self.metadata_log.close()
