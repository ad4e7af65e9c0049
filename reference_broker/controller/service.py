"""The controller as a network service: a QuorumController on its own listener, serving the CONTROLLER registry.

Runs inside the controller process (``python -m reference_broker controller``) or, for a single broker, in the
same process as that broker (KRaft's combined mode, ``process.roles=broker,controller``).
"""
from __future__ import annotations

import random
from pathlib import Path

from ..clock import Clock
from ..config import BrokerConfig
from ..datadir import prepare_data_dir
from ..log.base import Log
from ..log.memory import MemoryLog
from ..metadata.records import METADATA_TOPIC
from ..registry import CONTROLLER
from ..server import Server
from .configs import ensure_cluster_defaults
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
        self.controller = QuorumController(config, self.metadata_log, clock, rng, faults)
        # the controller honours the cluster-default dynamic configs (unclean.leader.election.enable, ...); a broker
        # in the same process rebinds the shared config to its own image and id
        config.bind_dynamic(self.controller.image, -1)
        self.server = Server(self, CONTROLLER)
        self.host = "127.0.0.1"
        self.port = 0

    async def start(self, host: str, port: int) -> int:
        self.port = await self.server.start(host, port)
        self.host = host
        self.controller.bootstrap_features()
        self.controller.start_ticker()
        ensure_cluster_defaults(self.controller)
        return self.port

    async def stop(self) -> None:
        self.controller.stop()
        await self.server.stop()
        self.metadata_log.flush()
        self.metadata_log.close()
