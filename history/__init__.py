"""The history contract shared by every workload, suite and checker; the specification is history/schema.py."""

from .io import (
    CorruptLineWarning,
    History,
    expand_paths,
    iter_histories,
    read,
    read_bytes,
    read_jsonl,
    read_parquet,
    write_jsonl,
    write_parquet,
)
from .recorder import Recorder
from .schema import SCHEMA_VERSION, HistoryError, key_of, split_key, validate_op

__all__ = [
    "SCHEMA_VERSION",
    "CorruptLineWarning",
    "History",
    "HistoryError",
    "Recorder",
    "expand_paths",
    "iter_histories",
    "key_of",
    "read",
    "read_bytes",
    "read_jsonl",
    "read_parquet",
    "split_key",
    "validate_op",
    "write_jsonl",
    "write_parquet",
]
