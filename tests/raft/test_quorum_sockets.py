"""The controller quorum over real sockets in one process: three ControllerServices (controller/service.py) with
durable logs, their Raft RPCs in Kafka's wire format (controller/quorum.py), and a network cut made by dropping what
one controller sends and receives (the in-process counterpart of the simulation's partitions).

QUORUM-TRUNCATE-DEPOSED (KIP-595: a follower truncates to the leader's DivergingEpoch): a leader cut off from the
others appends a record it can never commit; the others elect a leader that commits its own; once the cut heals,
the deposed leader's uncommitted record is truncated from its log and was never applied to its image, and the three
durable logs are identical. Switch raft.no_truncation_on_diverging_epoch (the new leader never answers a
DivergingEpoch) makes the deposed leader keep it.
"""
from __future__ import annotations

import asyncio
import random
import time
from pathlib import Path

import pytest

from reference_broker.clock import Clock
from reference_broker.config import BrokerConfig
from reference_broker.controller.quorum import decode_entries, parse_voters
from reference_broker.controller.service import ControllerService
from reference_broker.faults import Faults
from reference_broker.ports import free_port

# Short Raft timers (the settings' names are Kafka's): the test waits for bounds derived from them.
TIMERS = {"controller.quorum.election.timeout.ms": 500, "controller.quorum.fetch.timeout.ms": 1000,
          "controller.quorum.election.backoff.max.ms": 500, "controller.quorum.request.timeout.ms": 1000}
LOAD_FACTOR = 10


def bound_s() -> float:
    t = TIMERS
    return LOAD_FACTOR * (2 * t["controller.quorum.fetch.timeout.ms"] + 2 * t["controller.quorum.election.timeout.ms"]
                          + t["controller.quorum.election.backoff.max.ms"]) / 1000


def register(node: int) -> dict:
    return {"type": "register_broker", "broker_id": node, "incarnation": f"i{node}", "host": "h", "port": 1,
            "repl_host": "h", "repl_port": 1, "rack": None, "epoch": -1}


async def until(cond, what: str) -> None:
    deadline = time.monotonic() + bound_s()
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {bound_s():.0f} s: {what}")
        await asyncio.sleep(0.02)


def cut(svc: ControllerService) -> None:
    """Drop everything ``svc``'s Raft client sends and answer nothing it receives."""
    d = svc.raft
    d.saved = (d._dispatch, d.handle_inbound)

    async def silent(src, body, timeout_s):
        await asyncio.sleep(timeout_s)
        return None
    d._dispatch = lambda msgs: None
    d.handle_inbound = silent


def heal(svc: ControllerService) -> None:
    d = svc.raft
    d._dispatch, d.handle_inbound = d.saved


async def run_scenario(tmp_path: Path, faults: list[str]) -> dict:
    ports = {1000 + i: free_port("127.0.0.1") for i in range(3)}
    voters = ",".join(f"{v}@127.0.0.1:{p}" for v, p in ports.items())
    assert sorted(parse_voters(voters)) == sorted(ports)
    svcs: dict[int, ControllerService] = {}
    try:
        for v, p in ports.items():
            cfg = BrokerConfig({"node.id": v, "controller.quorum.voters": voters, **TIMERS})
            svcs[v] = ControllerService(cfg, tmp_path / f"c{v}", Clock(), random.Random(v), Faults(faults))
            await svcs[v].start("127.0.0.1", p)
        for _attempt in range(3):   # on a loaded machine a first leader may be deposed before it commits: retry
            await until(lambda: sum(s.controller.active for s in svcs.values()) == 1, "one active controller")
            old = next(v for v, s in svcs.items() if s.controller.active)
            c = svcs[old].controller
            c._commit([register(0)])
            if await c.wait_committed(timeout_s=bound_s()):
                break
        else:
            raise AssertionError("three active controllers in a row lost leadership before committing a record")
        cut(svcs[old])
        c._commit([register(99)])           # can never be committed: nobody hears it
        assert 99 in c.image.brokers        # the active controller's uncommitted image
        others = [v for v in svcs if v != old]
        await until(lambda: any(svcs[v].controller.active for v in others), "a new active controller")
        new = next(v for v in others if svcs[v].controller.active)
        svcs[new].controller._commit([register(1)])
        assert await svcs[new].controller.wait_committed(timeout_s=bound_s())
        # check-quorum deposed the cut-off leader: its image is the committed records only
        await until(lambda: not c.active, "the cut-off leader resigned (check-quorum)")
        assert 99 not in c.image.brokers
        heal(svcs[old])
        hw = svcs[new].controller.committed_offset

        def settled() -> bool:     # every log as long as the others and committed to its end
            ends = {(s.raft.log.end_offset(), s.controller.committed_offset) for s in svcs.values()}
            return len(ends) == 1 and next(iter(ends))[0] == next(iter(ends))[1] >= hw
        await until(settled, "the deposed leader following, every log committed to the same end")
        logs = {v: s.raft.log.entries for v, s in svcs.items()}
        return {"old": old, "new": new, "logs": logs, "images": {v: sorted(s.controller.image.brokers)
                                                                  for v, s in svcs.items()}}
    finally:
        for s in svcs.values():
            await s.stop()


def check(r: dict, tmp_path: Path) -> None:
    logs = r["logs"]
    assert logs[r["old"]] == logs[r["new"]], "the deposed leader's log differs from the new leader's"
    assert all(e.data.get("broker_id") != 99 for e in logs[r["old"]])
    assert r["images"][r["old"]] == [0, 1], r["images"]
    # durable: the same records are on disk (what a restart replays)
    seg = sorted((tmp_path / f"c{r['old']}" / "__cluster_metadata-0").glob("*.log"))[0]
    assert [e.data for e in decode_entries(seg.read_bytes())] == [e.data for e in logs[r["old"]]]


async def test_deposed_leader_truncates_its_uncommitted_records(tmp_path: Path) -> None:
    check(await run_scenario(tmp_path, []), tmp_path)


async def test_switch_no_truncation_keeps_the_deposed_leaders_record(tmp_path: Path) -> None:
    with pytest.raises(AssertionError):
        check(await run_scenario(tmp_path, ["raft.no_truncation_on_diverging_epoch"]), tmp_path)
