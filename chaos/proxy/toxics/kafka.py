"""kafka: placeholder until the Kafka-aware toxic lands."""

from __future__ import annotations

from dataclasses import dataclass

from .base import Toxic


@dataclass
class KafkaToxic(Toxic):
    type = "kafka"
    default_stream = "upstream"
