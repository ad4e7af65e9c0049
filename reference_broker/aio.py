"""Small asyncio helpers shared by the node and its fetchers."""
from __future__ import annotations

import asyncio
from collections.abc import Iterable


async def cancel_and_wait(tasks: Iterable[asyncio.Task], tries: int = 20, interval_s: float = 0.25) -> None:
    """Cancel ``tasks`` and wait until they end. A task that swallowed its cancellation (a cancel racing an answer
    inside a library's wait, e.g. Python 3.11's ``asyncio.wait_for``, gh-86296) is cancelled again instead of
    being waited on forever; after ``tries`` rounds it is left behind."""
    pending = {t for t in tasks if not t.done()}
    for _ in range(tries):
        if not pending:
            return
        for t in pending:
            t.cancel()
        _done, pending = await asyncio.wait(pending, timeout=interval_s)
