"""Network faults over named proxies, through Toxiproxy's HTTP API (so they work with a real Toxiproxy too).

Topology: every broker's client-facing address and every inter-broker link is a named proxy. A network
partition is then a set of proxies switched off: `Partition.between(links, components)` cuts every link whose
two ends are in different components (Jepsen's grudge), and `heal()` switches them back on. Helpers build the
usual components: `split_one` (isolate a node), `majority_minority`, `bridge`.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


class ToxiproxyError(RuntimeError):
    """The API answered an error: `status` and Toxiproxy's message."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status
        self.message = message


class ToxiproxyClient:
    """A small synchronous Toxiproxy API client (stdlib only) for faults and nemeses."""

    def __init__(self, api: str = "127.0.0.1:8474", timeout: float = 10.0) -> None:
        self.base = api if api.startswith("http") else f"http://{api}"
        self.timeout = timeout

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as e:
            raw = e.read()
            try:
                message = json.loads(raw).get("error", raw.decode(errors="replace"))
            except ValueError:
                message = raw.decode(errors="replace")
            raise ToxiproxyError(e.code, message) from None
        return json.loads(raw) if raw.strip() else None

    def version(self) -> str:
        return str(self._call("GET", "/version")["version"])

    def proxies(self) -> dict[str, dict[str, Any]]:
        return self._call("GET", "/proxies")

    def create(self, name: str, upstream: str, listen: str = "127.0.0.1:0", enabled: bool = True) -> dict[str, Any]:
        return self._call("POST", "/proxies", {"name": name, "upstream": upstream, "listen": listen,
                                               "enabled": enabled})

    def delete(self, name: str) -> None:
        self._call("DELETE", f"/proxies/{urllib.parse.quote(name, safe='')}")

    def set_enabled(self, name: str, enabled: bool) -> dict[str, Any]:
        return self._call("POST", f"/proxies/{urllib.parse.quote(name, safe='')}", {"enabled": enabled})

    def add_toxic(self, proxy: str, type_: str, *, name: str | None = None, stream: str = "downstream",
                  toxicity: float = 1.0, attributes: Mapping[str, Any] | None = None) -> dict[str, Any]:
        body = {"type": type_, "stream": stream, "toxicity": toxicity, "attributes": dict(attributes or {})}
        if name is not None:
            body["name"] = name
        return self._call("POST", f"/proxies/{urllib.parse.quote(proxy, safe='')}/toxics", body)

    def remove_toxic(self, proxy: str, name: str) -> None:
        self._call("DELETE", f"/proxies/{urllib.parse.quote(proxy, safe='')}/toxics/"
                             f"{urllib.parse.quote(name, safe='')}")

    def reset(self) -> None:
        """Enable every proxy and remove every toxic (Toxiproxy's /reset): the undo of last resort."""
        self._call("POST", "/reset")


@dataclass
class Topology:
    """Which proxy carries which traffic. Node names: "b<id>" for brokers, "c" (or any) for clients.

    `links` maps (from, to) -> proxy name; a client-facing proxy of broker 1 is ("c", "b1"). On a single broker
    only client links exist; a proxied reference cluster (fixtures/proxied.py) adds ("b1", "b2") follower-fetch
    links and ("b1", "controller") controller links.

    `colocated` names link ends that live inside another node's process: on Kafka in combined mode "k1" (node 1's
    controller role) runs in the JVM of "b1", so ("b0", "k1") is node 0's controller link to node 1 and a split
    that puts "b1" somewhere takes "k1" with it. `nodes()` lists only the hosts a split can place.
    """

    links: dict[tuple[str, str], str] = field(default_factory=dict)
    colocated: dict[str, str] = field(default_factory=dict)

    def host(self, node: str) -> str:
        """The node whose process `node` runs in (itself unless colocated)."""
        return self.colocated.get(node, node)

    def nodes(self) -> list[str]:
        return sorted({self.host(n) for pair in self.links for n in pair})

    def client_proxy(self, broker_id: int) -> str | None:
        return next((p for (a, b), p in self.links.items() if b == f"b{broker_id}" and not a.startswith("b")), None)

    def proxies_of(self, node: str) -> list[str]:
        return sorted({p for (a, b), p in self.links.items() if node in (self.host(a), self.host(b))})


def cut_links(topology: Topology, components: Sequence[Iterable[str]]) -> list[str]:
    """The proxies to disable so that nodes in different components cannot talk (Jepsen's complete grudge).

    Nodes not named in any component stay connected to everyone; a colocated link end goes with its host.
    """
    where: dict[str, int] = {}
    for i, comp in enumerate(components):
        for node in comp:
            where[node] = i
    cut = set()
    for (a, b), p in topology.links.items():
        ha, hb = topology.host(a), topology.host(b)
        if ha in where and hb in where and where[ha] != where[hb]:
            cut.add(p)
    return sorted(cut)


def split_one(nodes: Sequence[str], node: str) -> list[list[str]]:
    """Isolate `node` from all the others (also: isolate the leader / the controller, given its node)."""
    return [[node], [n for n in nodes if n != node]]


def majority_minority(nodes: Sequence[str], rng: Any) -> list[list[str]]:
    """A random split into a majority and a minority (Jepsen's partition-random-halves)."""
    shuffled = list(nodes)
    rng.shuffle(shuffled)
    half = len(shuffled) // 2
    return [shuffled[half:], shuffled[:half]]


def bridge(nodes: Sequence[str], rng: Any) -> tuple[list[list[str]], str]:
    """Two halves plus one bridge node that sees both (Jepsen's bridge): returns the grudge as cut pairs."""
    shuffled = list(nodes)
    rng.shuffle(shuffled)
    mid = len(shuffled) // 2
    return [shuffled[:mid], shuffled[mid + 1:]], shuffled[mid]


class Partition:
    """Disable a set of proxies (one network partition); `heal()` re-enables exactly those."""

    def __init__(self, client: ToxiproxyClient, proxies: Iterable[str]) -> None:
        self.client = client
        self.proxies = sorted(set(proxies))
        self.applied: list[str] = []

    @classmethod
    def between(cls, client: ToxiproxyClient, topology: Topology, components: Sequence[Iterable[str]]) -> Partition:
        return cls(client, cut_links(topology, components))

    def apply(self) -> list[str]:
        for name in self.proxies:
            self.client.set_enabled(name, False)
            self.applied.append(name)
        return list(self.applied)

    def heal(self) -> None:
        """Re-enable every proxy this partition disabled (tries all, raises the first failure at the end)."""
        first: Exception | None = None
        while self.applied:
            name = self.applied.pop()
            try:
                self.client.set_enabled(name, True)
            except Exception as e:  # noqa: BLE001 - heal the rest first
                first = first or e
        if first is not None:
            raise first


class Heal:
    """Re-enable named proxies (by default every proxy the API knows): the undo for any partition."""

    def __init__(self, client: ToxiproxyClient, proxies: Iterable[str] | None = None) -> None:
        self.client = client
        self.proxies = None if proxies is None else sorted(set(proxies))

    def apply(self) -> list[str]:
        names = self.proxies if self.proxies is not None else sorted(self.client.proxies())
        for name in names:
            self.client.set_enabled(name, True)
        return names
