"""Loopback listen ports for the processes this toolkit starts (brokers, controllers, proxies).

Why not ``bind(0)``: the OS picks that port from the ephemeral range, the same range every outgoing connection
takes its source port from. Between the pick and the child's own bind, any client connection on the machine (an
xdist worker's producer, say) may take the port as its source, and the broker then dies with "Address already in
use" (seen in CI: a Kafka node's REPLICATION listener). Ports below the ephemeral range are never handed out as
source ports, so a pick there can only collide with another explicit bind, which the probe below catches.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_LOWEST = 10000
# Not the run's seeded RNG: which port a listener gets is not part of any history and must differ between
# concurrent test workers, so it is seeded from the OS.
_pick = random.Random()


def _ephemeral_low() -> int:
    try:
        return int(_RANGE_FILE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def bindable(port: int, host: str) -> bool:
    """True if a server (with SO_REUSEADDR, as Kafka and ours set) could listen on host:port now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
            s.listen(1)
        except OSError:
            return False
    return True


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port on `host` that nothing listens on now, outside the ephemeral range where one can be found."""
    low = _ephemeral_low()
    if low - _LOWEST >= 1000:
        for _ in range(200):
            port = _pick.randrange(_LOWEST, low)
            if bindable(port, host):
                return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]
