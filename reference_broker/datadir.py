"""Data directories: checked once, with one clear error, before any node writes into them."""
from __future__ import annotations

import os
from pathlib import Path


class DataDirError(RuntimeError):
    """The data directory cannot be used (not a directory, not writable, corrupt metadata)."""


def prepare_data_dir(d: Path) -> Path:
    try:
        d.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise DataDirError(f"data dir {d} is not a directory") from None
    except OSError as e:
        raise DataDirError(f"cannot create data dir {d}: {e.strerror}") from None
    if not d.is_dir():
        raise DataDirError(f"data dir {d} is not a directory")
    if not os.access(d, os.W_OK | os.X_OK):
        raise DataDirError(f"data dir {d} is not writable")
    return d
