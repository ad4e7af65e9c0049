"""A seed -> a fault schedule. Pure: the same seed and spec give the same steps, with no clock or target involved,
so `python -m chaos nemesis plan --seed N` prints exactly what a run with that seed will do."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from typing import Any

from .base import Nemesis, PlanInput
from .bridge import BridgeNemesis
from .delete_consumed import DeleteConsumedNemesis
from .isolate_controller import IsolateControllerNemesis
from .isolate_leader import IsolateLeaderNemesis
from .isolate_storage import IsolateStorageNemesis
from .kafka_error import KafkaErrorNemesis
from .kill import KillNemesis
from .kill_controller import KillControllerNemesis
from .kill_follower import KillFollowerNemesis
from .kill_leader import KillLeaderNemesis
from .kill_storage import KillStorageNemesis
from .latency import LatencyNemesis
from .majority_minority import MajorityMinorityNemesis
from .partition import PartitionNemesis
from .pause import PauseNemesis
from .pause_controller import PauseControllerNemesis
from .pause_storage import PauseStorageNemesis
from .refuse_produce import RefuseProduceNemesis
from .restart import RestartNemesis
from .stall_followers import StallFollowersNemesis

NEMESES: dict[str, Nemesis] = {n.kind: n for n in (
    KillNemesis(), PauseNemesis(), RestartNemesis(), PartitionNemesis(), LatencyNemesis(), KafkaErrorNemesis(),
    # network splits of a proxied cluster (fixtures.proxied): need a topology with broker and controller links
    IsolateLeaderNemesis(), IsolateControllerNemesis(), MajorityMinorityNemesis(), BridgeNemesis(),
    # the active controller, found when the fault starts (DescribeQuorum on Kafka, the controller process on the
    # reference cluster)
    KillControllerNemesis(), PauseControllerNemesis(),
    # a partition's current leader / its followers, found when the fault starts (Metadata)
    KillLeaderNemesis(), StallFollowersNemesis(), KillFollowerNemesis(),
    # the liveness schedules' faults (chaos/scenarios.py): Produce refused on every client proxy, consumed records
    # deleted
    RefuseProduceNemesis(), DeleteConsumedNemesis(),
    # the shared storage of a target that has one (Tansu over PostgreSQL: node -1, topology node "s")
    KillStorageNemesis(), PauseStorageNemesis(), IsolateStorageNemesis())}


@dataclass(frozen=True)
class ScheduleSpec:
    """Every `interval` s a random fault from `faults` for `duration` s, until `total` s (Jepsen's stagger)."""

    interval: float = 10.0
    duration: float = 5.0
    total: float = 60.0
    faults: tuple[str, ...] = ("kill", "pause", "partition", "latency", "kafka-error")
    brokers: tuple[int, ...] = (0,)
    clients: tuple[str, ...] = ("c",)
    controllers: tuple[str, ...] = ()  # e.g. ("controller",) on the proxied reference cluster
    topics: tuple[str, ...] = ()  # for isolate-leader (empty: the first topic when the fault starts)

    def __post_init__(self) -> None:
        unknown = [f for f in self.faults if f not in NEMESES]
        if unknown:
            raise ValueError(f"unknown faults {unknown}; known: {sorted(NEMESES)}")
        if self.interval <= 0 or self.duration < 0 or self.total < 0 or not self.brokers or not self.faults:
            raise ValueError("interval > 0, duration >= 0, total >= 0, at least one broker and one fault")


@dataclass(frozen=True)
class Step:
    """One fault: start `at` seconds after the run starts, stop `duration` seconds later."""

    id: int
    at: float
    duration: float
    kind: str
    params: dict[str, Any]

    def describe(self) -> str:
        return (f"{self.at:8.2f}s  +{self.duration:.2f}s  #{self.id:<3} {self.kind:<12} "
                f"{json.dumps(self.params, sort_keys=True)}")


def generate(seed: int, spec: ScheduleSpec) -> list[Step]:
    """The schedule for `seed`: deterministic (one random.Random(seed), faults in a fixed order)."""
    rng = random.Random(seed)
    where = PlanInput(brokers=spec.brokers, nodes=[*spec.clients, *(f"b{b}" for b in spec.brokers)],
                      controllers=spec.controllers, topics=spec.topics)
    steps = []
    n = int(spec.total // spec.interval)
    for i in range(n):
        kind = rng.choice(spec.faults)
        params = NEMESES[kind].plan(rng, where)
        at = round(i * spec.interval, 6)
        steps.append(Step(i, at, min(spec.duration, max(spec.total - at, 0.0)), kind, params))
    return steps
