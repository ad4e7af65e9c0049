"""The processes behind a target, by node: for RSS, and to prove none outlives the target's stop()."""

from __future__ import annotations

from typing import Any

from fixtures.net import parse_bootstrap, port_is_free
from fixtures.process import pid_running


def node_pids(target: Any) -> dict[str, int]:
    """{node name: PID} of a running target's processes.

    Apache Kafka (`status()`): "node-<id>" per JVM (combined broker+controller, or one role). The reference
    target: "broker-<id>" per broker and "controller" for the cluster's controller process; one combined process
    is "broker-0". Targets without local processes (live, docker) give {}."""
    status = getattr(target, "status", None)
    if callable(status):
        return {f"node-{nid}": s["pid"] for nid, s in status().items() if s.get("pid")}
    cfg = target.config()
    if cfg.get("pids"):
        return {name: pid for name, pid in cfg["pids"].items() if pid}
    return {"broker-0": cfg["pid"]} if cfg.get("pid") else {}


def leftovers(pids: dict[str, int], bootstrap: str) -> list[str]:
    """What is still there after stop(): live PIDs and client ports still accepting (empty when clean)."""
    left = [f"{name} pid {pid} still running" for name, pid in pids.items() if pid_running(pid)]
    left += [f"{host}:{port} still accepts" for host, port in parse_bootstrap(bootstrap)
             if not port_is_free(port, host)]
    return left
