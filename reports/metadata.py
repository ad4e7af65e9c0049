"""The metadata workload's checker: topics created, deleted and grown by concurrent admin requests, and Metadata
reads from every broker (history/schema.py ``create_topic`` ... ``metadata``).

What Kafka promises, and so what is checked
===========================================
- **Writes are decided by one controller, in one log.** CreateTopics, DeleteTopics, CreatePartitions and
  ElectLeaders are forwarded by the broker to the active controller, which answers once the records are committed
  to the metadata log (KIP-500/KIP-631, QuorumController). Their answers are therefore linearizable against one
  register per topic: absent, or present with N partitions (:data:`TOPIC_METADATA`, checked with the
  Wing-Gong-Lowe engine of :mod:`reports.linearizability`). One relaxation, from Kafka's code: a broker retries a
  forwarded request on the new controller when the old one disconnected (NodeToControllerRequestThread puts the
  request back on a disconnect or NOT_CONTROLLER), so a request may meet its *own* earlier effect: a create may
  answer TOPIC_ALREADY_EXISTS for the topic it created, a delete UNKNOWN_TOPIC_OR_PARTITION for the topic it
  deleted, a CreatePartitions INVALID_PARTITIONS for the count it set. Those answers are read as "after this
  request the topic is present / absent / has at least N partitions".
- **Brokers apply the committed log asynchronously.** A Metadata read may lag behind an acknowledged write: Kafka's
  Admin javadoc (createTopics) says "It may take several seconds after CreateTopicsResult returns success for all
  the brokers to become aware that the topics have been created", and a broker cut off from the controller keeps
  serving its last image for as long as the cut lasts, so there is no staleness bound during faults. Such reads
  are ``lagging-read`` (reported, always acceptable) and are not part of the linearizability model.
- **One broker's view never goes backwards.** A KIP-631 broker applies the committed records in log order and
  serves Metadata only after its initial catch-up (BrokerServer waits for it before serving), also after a
  restart. So, per broker, reads in real-time order (one invoked after the other completed) must move forward in
  each topic's life: absent (not yet created) -> present with N -> present with M >= N -> absent (deleted).
- **After every fault is healed the brokers converge.** The run's final reads (``final: true``, from every broker,
  after the nemesis) must show every acknowledged change; they join the linearizability model as reads.

Anomalies (names a user understands; each case lists the operations that show it)
==================================================================================
- ``lost-create``        an acknowledged create, no delete of the topic ever invoked, and a final read (after
                         every fault was healed) that does not show the topic.
- ``phantom``            a read shows a topic no create had been invoked for before the read completed, or more
                         partitions than any create/CreatePartitions invoked by then asked for; or shows a topic
                         again after an acknowledged delete (a final read, or a broker that had shown it deleted),
                         with no create that could have taken effect since (every create completed before it).
- ``partitions-shrunk``  one broker shows fewer partitions than it showed before (no delete in between), or a
                         final read shows fewer than an acknowledged create or CreatePartitions set.
- ``stale-read``         one broker's view went backwards: it shows a topic absent after showing it present with
                         no delete invoked by then.
- ``lagging-read``       a read that does not yet reflect a write acknowledged before it began (acceptable).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from kafka import errors as E

from history.schema import METADATA_FS

from .linearizability import INF, NOT_LEGAL, Kernel, Model, Operation, check_operations

METADATA_ANOMALIES = ("lost-create", "phantom", "partitions-shrunk", "stale-read", "lagging-read")

_EXISTS = E.TopicAlreadyExistsError.errno
_UNKNOWN = E.UnknownTopicOrPartitionError.errno
_INVALID_PARTITIONS = E.InvalidPartitionsError.errno
_NOT_NEEDED = E.ElectionNotNeededError.errno
_PREFERRED_NA = E.PreferredLeaderNotAvailableError.errno


@dataclass
class MOp:
    """One metadata operation: its invoke and completion (``typ`` info when it never completed)."""

    f: str
    process: int
    call: int
    ret: float          # time_ns of the completion; INF when unknown (info, or no completion)
    typ: str            # ok | fail | info
    value: dict
    refs: list[dict] = field(default_factory=list)  # the recorded invoke and completion, as evidence

    @property
    def topic(self) -> str:
        return self.value.get("topic", "")

    @property
    def code(self) -> int | None:
        return self.value.get("code")


def has_metadata(ops: Sequence[dict]) -> bool:
    """Whether a run holds metadata operations (then :func:`check` applies)."""
    return any(op["f"] in METADATA_FS for op in ops)


def _evidence(op: dict) -> dict:
    return {"index": op["index"], "time_ns": op["time_ns"], "process": op["process"], "type": op["type"],
            "f": op["f"], "value": op["value"]}


def pair(ops: Sequence[dict]) -> list[MOp]:
    """The run's metadata operations, invoke paired with completion by process, in invoke order."""
    out: list[MOp] = []
    pending: dict[int, MOp] = {}
    for op in ops:
        f = op["f"]
        if f not in METADATA_FS:
            continue
        p = op["process"]
        if op["type"] == "invoke":
            m = MOp(f, p, op["time_ns"], INF, "info", dict(op["value"] or {}), [_evidence(op)])
            pending[p] = m
            out.append(m)
            continue
        m = pending.pop(p, None)
        if m is None or m.f != f:
            continue
        m.typ = op["type"]
        m.refs.append(_evidence(op))
        m.value = {**m.value, **(op["value"] or {})}
        if m.typ != "info":
            m.ret = op["time_ns"]
    return out


# ---------------------------------------------------------------- the linearizability model

def _step(state: int | None, inp: tuple, out: Any) -> tuple[bool, int | None]:
    """One topic's register: ``None`` = absent, ``n`` = present with n partitions. ``out`` is the answer:
    "ok", "exists", "unknown", "invalid" (a definite error that observes the state), or None (unknown outcome)."""
    kind = inp[0]
    if kind == "create":
        n = inp[2]
        if out == "ok":
            return (state is None, n)
        # "exists" (maybe its own retried create) or unknown: present afterwards, created here if it was absent
        return True, (n if state is None else state)
    if kind == "delete":
        if out == "ok":
            return (state is not None, None)
        return True, None           # "unknown" (maybe its own retry) or an unknown outcome: absent afterwards
    if kind == "grow":
        n = inp[2]
        if out == "ok":
            return (state is not None and state < n, n)
        if out == "unknown":
            return (state is None, state)
        if state is None:           # "invalid" needs the topic; an unknown outcome changes nothing
            return (out is None, state)
        return True, max(state, n)  # "invalid" (at least n afterwards, maybe its own retry) or unknown
    if kind == "elect":
        p = inp[2]
        if out == "exists":
            return (state is not None and p < state, state)
        return (state is None or p >= state, state)  # "unknown"
    return (out == state, state)    # a converged final read


def _describe(inp: tuple, out: Any) -> str:
    kind, topic = inp[0], inp[1]
    arg = f" {inp[2]}" if len(inp) > 2 else ""
    return f"{kind} {topic}{arg} -> {'?' if out is None and kind != 'read' else out}"


def _by_topic(ops: list[Operation]) -> list[tuple[Any, list[Operation]]]:
    parts: dict[str, list[Operation]] = {}
    for op in ops:
        parts.setdefault(op.input[1], []).append(op)
    return sorted(parts.items())


def _compile(ops: Sequence[Operation]) -> Kernel:
    inputs = [op.input for op in ops]
    outputs = [op.output for op in ops]

    def step(state: Any, i: int) -> Any:
        legal, new = _step(state, inputs[i], outputs[i])
        return new if legal else NOT_LEGAL

    return Kernel(None, step)


TOPIC_METADATA = Model(
    name="topic-metadata",
    init=lambda: None,
    step=_step,
    partition=_by_topic,
    is_read=lambda inp: inp[0] in ("read", "elect"),
    describe_operation=_describe,
    describe_state=lambda s: "absent" if s is None else f"{s} partitions",
    compile=_compile,
)


def metadata_operations(mops: Sequence[MOp]) -> list[Operation]:
    """The controller-decided operations and the final reads, as the search sees them. Failed requests whose
    error observes nothing (a refused replication factor, ...) are left out: they changed nothing."""
    out: list[Operation] = []
    for m in mops:
        ref = m.refs[-1]["index"]
        ret = m.ret if m.typ != "info" else INF
        if m.f == "create_topic":
            res = {"ok": "ok"}.get(m.typ) or ("exists" if m.code == _EXISTS and m.typ == "fail" else None)
            if m.typ == "fail" and res is None:
                continue
            out.append(Operation(m.process, ("create", m.topic, m.value["partitions"]), res, m.call, ret, ref))
        elif m.f == "delete_topic":
            res = "ok" if m.typ == "ok" else ("unknown" if m.typ == "fail" and m.code == _UNKNOWN else None)
            if m.typ == "fail" and res is None:
                continue
            out.append(Operation(m.process, ("delete", m.topic), res, m.call, ret, ref))
        elif m.f == "create_partitions":
            res = "ok" if m.typ == "ok" else None
            if m.typ == "fail":
                res = {_UNKNOWN: "unknown", _INVALID_PARTITIONS: "invalid"}.get(m.code or 0)
                if res is None:
                    continue
            out.append(Operation(m.process, ("grow", m.topic, m.value["count"]), res, m.call, ret, ref))
        elif m.f == "elect_leaders":
            if m.typ == "ok" or (m.typ == "fail" and m.code == _PREFERRED_NA):
                res = "exists"
            elif m.typ == "fail" and m.code == _UNKNOWN:
                res = "unknown"
            else:
                continue  # an unknown outcome or a refusal that observes nothing: no effect on the register
            out.append(Operation(m.process, ("elect", m.topic, m.value["partition"]), res, m.call, m.ret, ref))
        elif m.f == "metadata" and m.typ == "ok" and m.value.get("final"):
            for topic, n in (m.value.get("topics") or {}).items():
                out.append(Operation(m.process, ("read", topic), n, m.call, m.ret, ref))
    return out


# ---------------------------------------------------------------- anomalies

@dataclass
class _Life:
    """What the writes of one topic say, for the read rules."""

    create_invokes: list[MOp] = field(default_factory=list)
    creates_ok: list[MOp] = field(default_factory=list)
    delete_invokes: list[MOp] = field(default_factory=list)
    deletes_ok: list[MOp] = field(default_factory=list)
    grows: list[MOp] = field(default_factory=list)          # invoked CreatePartitions
    grows_ok: list[MOp] = field(default_factory=list)

    def created_since(self, t: float) -> list[MOp]:
        """The creates that may have taken effect after time ``t``: every one not completed by then (also one
        invoked before ``t`` and acknowledged after it, which may be linearized after a delete invoked at ``t``)."""
        return [c for c in self.create_invokes if c.ret > t]

    def asked_by(self, t: float) -> int:
        """The most partitions any create or CreatePartitions invoked before ``t`` asked for."""
        ns = [m.value["partitions"] for m in self.create_invokes if m.call < t]
        ns += [m.value["count"] for m in self.grows if m.call < t]
        return max(ns, default=0)


def _lives(mops: Sequence[MOp]) -> dict[str, _Life]:
    lives: dict[str, _Life] = {}
    for m in mops:
        if m.f == "metadata":
            continue
        life = lives.setdefault(m.topic, _Life())
        definite_noop = m.typ == "fail"
        if m.f == "create_topic":
            life.create_invokes.append(m)
            if m.typ == "ok":
                life.creates_ok.append(m)
        elif m.f == "delete_topic" and not (definite_noop and m.code != _UNKNOWN):
            life.delete_invokes.append(m)
            if m.typ == "ok":
                life.deletes_ok.append(m)
        elif m.f == "create_partitions":
            life.grows.append(m)
            if m.typ == "ok":
                life.grows_ok.append(m)
    return lives


def _case(topic: str, why: str, *ops: MOp, **extra: Any) -> dict:
    return {"key": topic, "why": why, **extra, "ops": [r for m in ops for r in m.refs[-1:]]}


def find_anomalies(mops: Sequence[MOp]) -> dict[str, list[dict]]:
    """Every metadata anomaly of the run, with its evidence (see the module docstring for the rules)."""
    out: dict[str, list[dict]] = {a: [] for a in METADATA_ANOMALIES}
    lives = _lives(mops)
    reads = [m for m in mops if m.f == "metadata" and m.typ == "ok"]
    last: dict[tuple[int, str], tuple[MOp, int | None]] = {}   # (node, topic) -> latest read shown, its view
    gone: dict[tuple[int, str], MOp] = {}                      # (node, topic) -> a read that showed it deleted
    for r in sorted(reads, key=lambda m: m.call):
        node = r.value["node"]
        final = bool(r.value.get("final"))
        for topic, n in r.value["topics"].items():
            life = lives.get(topic, _Life())
            deleted_before = [d for d in life.deletes_ok if d.ret < r.call]
            if n is not None:
                asked = life.asked_by(r.ret)
                if not [c for c in life.create_invokes if c.call < r.ret]:
                    out["phantom"].append(_case(topic, "shown, but no create of it was invoked", r))
                elif n > asked:
                    out["phantom"].append(_case(topic, f"{n} partitions shown, at most {asked} asked for", r,
                                                shown=n, asked=asked))
                if final and deleted_before and not life.created_since(deleted_before[-1].call):
                    out["phantom"].append(_case(topic, "a final read shows it after an acknowledged delete", r,
                                                deleted_before[-1]))
                g = gone.get((node, topic))
                if g is not None and not life.created_since(g.call):
                    name = "phantom" if deleted_before else "stale-read"
                    out[name].append(_case(topic, f"broker {node} shows it again after showing it deleted", r, g))
            prev = last.get((node, topic))
            # real-time order on one broker: the earlier read completed before this one began
            if prev is not None and prev[0].ret < r.call:
                pm, pn = prev
                if pn is not None and n is None:
                    if not [d for d in life.delete_invokes if d.call < r.ret]:
                        out["stale-read"].append(_case(topic, f"broker {node} showed it, then not (no delete)",
                                                       pm, r))
                    else:
                        gone[(node, topic)] = r
                elif pn is not None and n is not None and n < pn and \
                        not [d for d in life.delete_invokes if d.call < r.ret]:
                    out["partitions-shrunk"].append(_case(topic, f"broker {node} showed {pn}, then {n}", pm, r,
                                                          before=pn, after=n))
            if n is None and deleted_before:
                gone.setdefault((node, topic), r)
            if prev is None or prev[0].ret < r.call:
                last[(node, topic)] = (r, n)
            # what the read should reflect, had the broker caught up: writes acknowledged before it began
            no_delete = not life.delete_invokes
            if final:
                if n is None and life.creates_ok and no_delete:
                    out["lost-create"].append(_case(topic, f"acknowledged, absent from broker {node}'s final read",
                                                    life.creates_ok[0], r))
                grown = [g for g in life.grows_ok + life.creates_ok if no_delete]
                want = max((g.value.get("count", g.value.get("partitions", 0)) for g in grown), default=0)
                if n is not None and n < want:
                    out["partitions-shrunk"].append(_case(topic, f"final read shows {n}, {want} acknowledged", r,
                                                          after=n, acknowledged=want))
            else:
                acked = [c for c in life.creates_ok if c.ret < r.call]
                if (n is None and acked and no_delete) or (n is not None and deleted_before) or (
                        n is not None and n < max((g.value["count"] for g in life.grows_ok if g.ret < r.call),
                                                  default=0)):
                    out["lagging-read"].append(_case(topic, f"broker {node} had not applied an acknowledged "
                                                            "change yet", r))
    return out


@dataclass
class MetadataResult:
    anomalies: dict[str, list[dict]]
    lin: Any
    topics: list[str]
    ops: int


def check(ops: Sequence[dict], budget_s: float = 10.0) -> MetadataResult:
    """Anomalies and the per-topic linearizability of one run's metadata operations."""
    mops = pair(ops)
    lin = check_operations(TOPIC_METADATA, metadata_operations(mops), budget_s=budget_s)
    topics = sorted({m.topic for m in mops if m.f != "metadata"})
    return MetadataResult(find_anomalies(mops), lin, topics, len(mops))
