"""Controller failover: kill -9 of the active controller of a 3-voter quorum -> a new leader in DescribeQuorum.

Per kill, on a cluster of 3 brokers and 3 dedicated controllers (``controllers=3`` on either target):
- ``to_leader_s``: from the SIGKILL of the quorum's leader to the first DescribeQuorum answer (asked of every
  broker every 20 ms; brokers forward it to the active controller) naming another leader in a newer epoch.
- ``to_create_s``: from the SIGKILL until a topic created right after the new leader appeared is acknowledged and
  has a leader in Metadata (the new active controller serves metadata changes).
Then the killed controller is restarted and the next kill waits until it follows again (every voter's log end offset
at the leader's high watermark in DescribeQuorum). Prints p50/p99 over ``--kills``.

    .venv/bin/python benchmarks/controller_failover.py [--target reference|kafka] [--kills 10]

The quorum timers are each target's defaults (controller.quorum.fetch.timeout.ms 2000, election.timeout.ms 1000),
the same names on both.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kafka.protocol.admin import DescribeQuorumRequest  # noqa: E402

from benchmarks.measure.clients import create_topic  # noqa: E402
from benchmarks.measure.stats import p50_p99  # noqa: E402
from fixtures import make_target  # noqa: E402
from fixtures.net import parse_bootstrap, round_trip  # noqa: E402

POLL_S = 0.02


def describe(host: str, port: int, timeout: float = 2.0) -> tuple[int, int, int, dict[int, int]] | None:
    """(leader, epoch, high watermark, {voter: log end offset}) from a broker, or None (no answer, no leader)."""
    TD = DescribeQuorumRequest.TopicData
    req = DescribeQuorumRequest[0](topics=[TD(topic_name="__cluster_metadata",
                                             partitions=[TD.PartitionData(partition_index=0)])])
    try:
        r = round_trip(host, port, req, timeout)
    except Exception:  # noqa: BLE001 - a broker between controllers: ask again
        return None
    if r.error_code or not r.topics or r.topics[0].partitions[0].error_code:
        return None
    p = r.topics[0].partitions[0]
    if p.leader_id < 0:
        return None
    return p.leader_id, p.leader_epoch, p.high_watermark, {v.replica_id: v.log_end_offset for v in p.current_voters}


def any_describe(brokers: list[tuple[str, int]]) -> tuple[int, int, int, dict[int, int]] | None:
    for host, port in brokers:
        d = describe(host, port)
        if d is not None:
            return d
    return None


def wait(probe: Any, ok: Any, timeout_s: float) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        v = probe()
        if ok(v) or time.monotonic() > deadline:
            return v
        time.sleep(POLL_S)


def run(target_name: str, kills: int, timeout_s: float) -> dict[str, Any]:
    cfg = {"brokers": "3", "controllers": "3", "kafka.broker.session.timeout.ms": "3000",
           "kafka.broker.heartbeat.interval.ms": "500", "kafka.offsets.topic.num.partitions": "3"}
    rows: list[dict[str, Any]] = []
    with make_target(target_name, config=cfg) as target:
        brokers = parse_bootstrap(target.bootstrap)
        print(f"{target.version()}: brokers {target.bootstrap}, controllers {target.controller_ids}", flush=True)
        for k in range(kills):
            before = wait(lambda: any_describe(brokers), lambda d: d is not None and d[3]
                          and min(d[3].values()) >= d[2], timeout_s)
            if before is None:
                raise SystemExit(f"kill {k + 1}: no quorum leader in DescribeQuorum within {timeout_s} s")
            old, epoch = before[0], before[1]
            t_kill = time.monotonic()
            target.kill_broker(old)
            after = wait(lambda: any_describe(brokers), lambda d, old=old, epoch=epoch: d is not None and d[0] != old and d[1] > epoch,
                         timeout_s)
            t_new = time.monotonic()
            got = after is not None and after[0] != old
            row: dict[str, Any] = {"kill": k + 1, "old": old, "epoch": epoch,
                                   "new": after[0] if got else None, "new_epoch": after[1] if got else None,
                                   "to_leader_s": round(t_new - t_kill, 3) if got else None}
            try:
                create_topic(target.bootstrap, f"after-kill-{k}", 1, 3, timeout=timeout_s)
                row["to_create_s"] = round(time.monotonic() - t_kill, 3)
            except Exception as e:  # noqa: BLE001 - recorded, the run goes on
                row["to_create_s"] = None
                row["create_error"] = str(e)[:200]
            print(f"  kill {k + 1}/{kills}: {json.dumps(row)}", flush=True)
            rows.append(row)
            target.restart(old)
    out = {"target": target_name, "kills": kills}
    for key in ("to_leader_s", "to_create_s"):
        vals = [r[key] for r in rows if r.get(key) is not None]
        out[key] = {**p50_p99(vals), "timeouts": len(rows) - len(vals)}
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target", choices=("reference", "kafka"), default="reference")
    ap.add_argument("--kills", type=int, default=10)
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for each step")
    args = ap.parse_args()
    s = run(args.target, args.kills, args.timeout)
    print(json.dumps(s))
    for key, what in (("to_leader_s", "kill -9 active controller -> new leader in DescribeQuorum"),
                      ("to_create_s", "kill -9 active controller -> a topic created (with a leader)")):
        f = s[key]
        if f["n"]:
            print(f"{what}: p50 {f['p50']:.2f} s, p99 {f['p99']:.2f} s over {f['n']} kills"
                  + (f" ({f['timeouts']} timed out)" if f["timeouts"] else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
