"""Process faults on a reference cluster someone else started, through the CONTROL socket it printed."""

from __future__ import annotations

import json
import socket


class ControlSocketTarget:
    """Process faults on a reference cluster someone else started, through the CONTROL socket it printed."""

    name = "live"

    def __init__(self, path: str, bootstrap: str) -> None:
        self.path = path
        self.bootstrap = bootstrap

    def _call(self, action: str, node: int | None = None) -> str:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(120)
            s.connect(self.path)
            s.sendall(f"{action} {'' if node is None else node}\n".encode())
            reply = s.makefile().readline().strip()
        if reply.startswith("error"):
            raise RuntimeError(f"control {action} {node}: {reply}")
        return reply

    @property
    def broker_ids(self) -> list[int]:
        pids = json.loads(self._call("status"))["pids"]
        return sorted(int(k.removeprefix("broker-")) for k in pids if k.removeprefix("broker-").isdigit())

    def kill_broker(self, b: int) -> None:
        self._call("kill", b)

    def pause_broker(self, b: int) -> None:
        self._call("pause", b)

    def resume_broker(self, b: int) -> None:
        self._call("resume", b)

    def restart(self, b: int) -> None:
        self._call("restart", b)
