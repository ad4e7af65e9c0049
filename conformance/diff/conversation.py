"""A conversation: the exact requests one check sent, on which connections, in which order and with which pauses.

What is kept (one JSON object per conversation, JSON Lines for a file of them):

- ``steps``: every request as its API key, the version sent and its fields (``conformance.diff.codec``), the time
  limit the client gave it, and how long the recorded target took to answer;
- ``events``: in the order they happened, ``open``/``close`` of a connection, ``send`` of a step and ``answer`` of a
  step (when the client received it), each with its time in ms since the conversation began. Replaying the events
  in this order keeps every causal dependency of the recording: a request is sent only after every answer the
  client had seen before it, and after the same pause;
- ``names``: the topic names, group ids and transactional ids the requests used (the schema's ``entityType``);
  replays give each a fresh name of the same length (its random hex part replaced), so a conversation can be
  replayed any number of times against a live cluster;
- member ids a broker handed out and the client sent back are not values but references: ``{"ref": "member@i"}``
  (exchange ``i`` was the JoinGroup whose answer carried it), resolved against each target's own answers, also
  inside bytes (the suites' assignments name their members). A string or bytes value with references is
  ``{"$s": [parts]}`` or ``{"$y": [parts]}``;
- ``excluded``: why a conversation cannot be replayed (it needs process faults: a killed, paused or restarted node,
  or a second, replicated cluster), or null.

:class:`Recorder` is the ``conformance.wire.ExchangeTap`` that builds one from the Wires of a running check.
"""
from __future__ import annotations

import base64
import json
import re
import time
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from conformance.wire import Wire
from reference_broker.client.protocol import Response

from .codec import entity_fields, iter_entities, request_tree, response_tree, to_json

NAME_ENTITIES = ("topicName", "groupId", "transactionalId")
SCHEMA = "kct-conversations/1"
_HEX = re.compile(r"[0-9a-f]{6,}")


@dataclass
class Step:
    """One request of a conversation."""

    index: int
    conn: int
    api_key: int
    version: int
    request: Any                    # JSON tree (codec.to_json) with member references
    timeout_s: float
    answered_ms: float | None = None    # how long the recorded target took; None: no answer seen
    failure: str | None = None          # the recorded failure (connection closed, timeout)


@dataclass
class Conversation:
    """The requests of one check (or one hypothesis example) and their order; see the module docstring."""

    id: str
    source: str = "suite"
    steps: list[Step] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    routes: dict[int, Any] = field(default_factory=dict)     # connection → "bootstrap" or {"node_rank": r}
    excluded: str | None = None
    outcome: str | None = None          # the check's outcome on the recorded target (pass, divergence, ...)
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["routes"] = {str(k): v for k, v in self.routes.items()}
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Conversation:
        c = cls(**{k: v for k, v in d.items() if k not in ("steps", "routes")})
        c.steps = [Step(**s) for s in d.get("steps", [])]
        c.routes = {int(k): v for k, v in d.get("routes", {}).items()}
        return c


def write_conversations(path: Path, conversations: Iterable[Conversation], *, append: bool = False) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a" if append else "w", encoding="utf-8") as fh:
        for c in conversations:
            fh.write(json.dumps({"schema": SCHEMA, **c.to_json()}) + "\n")


def read_conversations(path: Path) -> list[Conversation]:
    """Every conversation of a JSONL file; a line of another schema is an error naming the line."""
    out = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            d = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}:{n}: not JSON ({exc})") from None
        if d.pop("schema", None) != SCHEMA:
            raise ValueError(f"{path}:{n}: not a conversation ({SCHEMA})")
        out.append(Conversation.from_json(d))
    return out


def fresh_name(name: str, token: str) -> str:
    """``name`` with its first run of hex digits replaced by ``token`` cut or repeated to the same length (same
    length, same characters classes: a name that tests a limit still tests it); names without one are kept."""
    m = _HEX.search(name)
    if m is None:
        return name
    n = m.end() - m.start()
    return name[:m.start()] + (token * (n // len(token) + 1))[:n] + name[m.end():]


# ------------------------------------------------------------------------------------------------ recording
class Recorder:
    """An ``ExchangeTap`` that turns what one check sends into a :class:`Conversation`.

    ``bootstrap`` is the recorded target's bootstrap string: connections to it are routed to each replay target's
    bootstrap; a connection to another broker (a partition leader, a coordinator) to the broker of the same rank
    among the node ids, learned from the Metadata and FindCoordinator answers seen so far."""

    def __init__(self, conversation_id: str, bootstrap: str) -> None:
        self.conv = Conversation(conversation_id)
        self.t0 = time.monotonic()
        self.bootstrap = {a.strip() for a in bootstrap.split(",")}
        self.conn_of: dict[int, int] = {}          # id(wire) → connection index
        self.members: dict[str, str] = {}          # member id → "member@i"
        self.addresses: dict[str, int] = {}        # "host:port" → node id
        self._names: dict[str, None] = {}
        self._sent: dict[int, float] = {}

    def _t(self) -> float:
        return round((time.monotonic() - self.t0) * 1000, 1)

    def _conn(self, wire: Wire) -> int:
        if id(wire) not in self.conn_of:      # a Wire connected before the check began (a module fixture's)
            self.opened(wire)
        return self.conn_of[id(wire)]

    def opened(self, wire: Wire) -> None:
        idx = len(self.conn_of)
        self.conn_of[id(wire)] = idx
        addr = f"{wire.conn.host}:{wire.conn.port}"
        if addr in self.bootstrap:
            route: Any = "bootstrap"
        elif addr in self.addresses:
            ranks = sorted(set(self.addresses.values()))
            route = {"node_rank": ranks.index(self.addresses[addr])}
        else:
            route = "bootstrap"
            self.conv.notes.append(f"connection {idx} to {addr}: address never named in an answer, replayed to "
                                   "the bootstrap broker")
        self.conv.routes[idx] = route
        self.conv.events.append({"t": self._t(), "open": idx, "client_id": wire.conn.client_id})

    def closed(self, wire: Wire) -> None:
        if id(wire) in self.conn_of:
            self.conv.events.append({"t": self._t(), "close": self.conn_of[id(wire)]})

    def sent(self, wire: Wire, api_key: int, version: int, request: Any, timeout_s: float) -> int:
        conn = self._conn(wire)
        tree = request_tree(request)
        try:
            ents = entity_fields(api_key, request=True)
        except KeyError:
            ents = {}
        for et, value in iter_entities(tree, ents):
            if et in NAME_ENTITIES and isinstance(value, str) and value:
                self._names[value] = None
        idx = len(self.conv.steps)
        self.conv.steps.append(Step(idx, conn, api_key, version, self._refs(to_json(tree)), timeout_s))
        self.conv.events.append({"t": self._t(), "send": idx})
        self._sent[idx] = time.monotonic()
        return idx

    def answered(self, token: Any, response: Response | None, failure: str | None) -> None:
        step = self.conv.steps[token]
        if step.answered_ms is not None or step.failure is not None:
            return
        step.answered_ms = round((time.monotonic() - self._sent[token]) * 1000, 1)
        step.failure = failure
        self.conv.events.append({"t": self._t(), "answer": token})
        if response is None or response.body is None:
            return
        tree = response_tree(response.body)
        if step.api_key == 11 and tree.get("member_id") and tree["member_id"] not in self.members:
            self.members[tree["member_id"]] = f"member@{token}"
        if step.api_key == 3:
            for b in tree.get("brokers") or []:
                self.addresses[f"{b['host']}:{b['port']}"] = b["node_id"]
        if step.api_key == 10 and tree.get("host"):
            self.addresses[f"{tree['host']}:{tree['port']}"] = tree.get("node_id", -1)

    def _refs(self, value: Any) -> Any:
        """Member ids inside a JSON request tree → references (whole strings, substrings, inside bytes)."""
        if not self.members:
            return value
        if isinstance(value, str):
            parts = list(_split(value, self.members))
            return value if parts == [value] else {"$s": parts}
        if isinstance(value, dict) and set(value) == {"$b"}:
            raw = base64.b64decode(value["$b"])
            byte_members = {k.encode(): v for k, v in self.members.items()}
            parts = list(_split(raw, byte_members))
            if parts == [raw]:
                return value
            return {"$y": [p if isinstance(p, dict) else {"$b": base64.b64encode(p).decode()} for p in parts]}
        if isinstance(value, dict):
            return {k: self._refs(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self._refs(v) for v in value]
        return value

    def finish(self, outcome: str | None = None) -> Conversation:
        self.conv.names = list(self._names)
        self.conv.outcome = outcome
        return self.conv


def _split(value: Any, members: dict[Any, str]) -> Iterator[Any]:
    """``value`` cut into literal parts and ``{"ref": sym}`` parts at every occurrence of a member id."""
    if not value:
        yield value
        return
    best = None
    for mid, sym in members.items():
        pos = value.find(mid)
        if pos >= 0 and (best is None or pos < best[0] or pos == best[0] and len(mid) > len(best[1])):
            best = (pos, mid, sym)
    if best is None:
        yield value
        return
    pos, mid, sym = best
    if pos:
        yield value[:pos]
    yield {"ref": sym}
    rest = value[pos + len(mid):]
    if rest:
        yield from _split(rest, members)
