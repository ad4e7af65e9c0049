"""One module per toxic, named as Toxiproxy names it; `REGISTRY` maps the JSON `type` to the class."""

from __future__ import annotations

from .bandwidth import BandwidthToxic
from .base import Chunk, Stub, Toxic
from .kafka import KafkaToxic
from .kafka_rewrite import KafkaRewriteToxic
from .latency import LatencyToxic
from .limit_data import LimitDataToxic
from .reset_peer import ResetPeerToxic
from .slicer import SlicerToxic
from .slow_close import SlowCloseToxic
from .timeout import TimeoutToxic

REGISTRY: dict[str, type[Toxic]] = {
    cls.type: cls
    for cls in (
        LatencyToxic,
        BandwidthToxic,
        SlowCloseToxic,
        TimeoutToxic,
        ResetPeerToxic,
        SlicerToxic,
        LimitDataToxic,
        KafkaToxic,
        KafkaRewriteToxic,
    )
}

__all__ = ["REGISTRY", "Chunk", "Stub", "Toxic"]
