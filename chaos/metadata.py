"""The metadata workload (``chaos run --workload metadata``): concurrent admin requests that change the cluster's
metadata log, and Metadata reads from every broker, recorded in the one history format (history/schema.py
``create_topic`` ... ``metadata``) and checked by reports/metadata.py.

Why protocol level: every answer (each error code) is evidence for the checker (TOPIC_ALREADY_EXISTS observes a
present topic, INVALID_PARTITIONS a partition count), and a client library's retries would hide which request
had which outcome. Requests go through the reference's own client stack (reference_broker/client: a negotiated
connection per broker), to a broker chosen at random: Kafka brokers forward admin requests to the active
controller, so a dead or paused controller shows up in the answers of every broker.

Processes (``workers`` threads, each with its own connections) repeat, at ``rate`` operations per second in all:
- ``create_topic``: a new unique topic (``md-<run>-<process>-<n>``) with 1..``max_partitions`` partitions and the
  run's replication factor; sometimes a create of a topic that exists (its answer: TOPIC_ALREADY_EXISTS);
- ``create_partitions``: one more partition for a topic (skipped, with a note in the header, where the cluster
  does not serve CreatePartitions, key 37);
- ``delete_topic`` of a topic; a deleted name is never created again (the checker's life of a topic is linear);
- ``elect_leaders`` (preferred) for a partition of a topic;
- ``metadata``: a Metadata read of up to ``read_topics`` topics of the run (recent ones first) from one broker,
  recorded with that broker's id: a broker's view is checked against its own earlier views.
Outcomes: an answer without error is ``ok``; an error that says the request changed nothing (Kafka's definite
refusals: TOPIC_ALREADY_EXISTS, UNKNOWN_TOPIC_OR_PARTITION, INVALID_PARTITIONS, INVALID_REPLICATION_FACTOR, ...)
is ``fail`` with its ``code``; a timeout, a lost connection, or any other error (REQUEST_TIMED_OUT, NOT_CONTROLLER:
the controller may have committed it) is ``info``. A read that fails changes nothing: ``fail``.

After the faults: :meth:`MetadataWorkload.final_read` reads every topic of the run from every broker until they
agree (bounded), and records that round with ``final: true``.
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
from dataclasses import dataclass
from typing import Any

from kafka import errors as E
from kafka.protocol.admin import (
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteTopicsRequest,
    ElectLeadersRequest,
)
from kafka.protocol.metadata import MetadataRequest

from .queue import Stats
from .workers import Workers

CREATE_TOPICS, DELETE_TOPICS, METADATA, CREATE_PARTITIONS, ELECT_LEADERS = 19, 20, 3, 37, 43

# Errors after which the request certainly changed nothing (Kafka answers them before writing any record).
DEFINITE = frozenset(e.errno for e in (
    E.TopicAlreadyExistsError, E.UnknownTopicOrPartitionError, E.InvalidPartitionsError,
    E.InvalidReplicationFactorError, E.InvalidTopicError, E.InvalidRequestError, E.PolicyViolationError,
    E.PreferredLeaderNotAvailableError, E.ElectionNotNeededError, E.UnsupportedVersionError,
    E.TopicAuthorizationFailedError, E.ClusterAuthorizationFailedError, E.ThrottlingQuotaExceededError,
    E.InvalidReplicationAssignmentError))
# ElectLeaders answers that it did its job (or had nothing to do): the partition exists.
ELECTED = frozenset((0, E.ElectionNotNeededError.errno))


@dataclass
class MetadataSpec:
    """Workload shape; every field goes into the run header's settings."""

    workers: int = 3
    rate: float = 10.0          # operations per second over all workers
    replication: int = 3
    max_partitions: int = 3
    read_topics: int = 24       # topics per Metadata read (the most recent ones)
    request_timeout_s: float = 15.0
    final_timeout_s: float = 60.0

    def __post_init__(self) -> None:
        if self.workers < 1 or self.rate <= 0 or self.replication < 1 or self.max_partitions < 1:
            raise ValueError("workers >= 1, rate > 0, replication >= 1, max_partitions >= 1")


def _error(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}"[:300]


async def served_apis(bootstrap: str, timeout_s: float = 10.0) -> dict[int, int]:
    """ApiVersions of one broker of the cluster: api key -> highest version both sides speak."""
    from reference_broker.client import Cluster

    cluster = Cluster(bootstrap, request_timeout=timeout_s)
    try:
        conn = await cluster.any_connection()
        return dict(conn.versions)
    finally:
        await cluster.close()


def skipped_kinds(served: dict[int, int] | None) -> list[str]:
    """The operation kinds the cluster cannot serve, each with why (recorded in the run header)."""
    if served is not None and CREATE_PARTITIONS not in served:
        return ["create_partitions: the cluster does not serve CreatePartitions (key 37)"]
    return []


class MetadataWorkload:
    """Runs the processes until `stop()`, then `final_read()`; records everything to `recorder`."""

    unit = "requests"   # what the progress line counts

    def __init__(self, spec: MetadataSpec, recorder: Any, bootstrap: str, seed: int = 0,
                 served: dict[int, int] | None = None) -> None:
        self.spec = spec
        self.recorder = recorder
        self.bootstrap = bootstrap
        self.seed = seed
        self.stats = Stats()
        self._workers = Workers()
        self._stop = self._workers.stopping
        self.errors = self._workers.errors
        self._lock = threading.Lock()
        self.names: list[str] = []                 # every topic the run named, in order
        self.live: dict[str, int] = {}             # topics not (knowingly) deleted -> partitions we asked for
        self.deleted: set[str] = set()
        self.kinds = ["create_topic", "create_again", "create_partitions", "delete_topic", "elect_leaders",
                      "metadata"]
        self.skipped = skipped_kinds(served)
        if self.skipped:
            self.kinds.remove("create_partitions")
        self.counts = dict.fromkeys(self.kinds, 0)

    # -- lifecycle
    def start(self) -> None:
        for i in range(self.spec.workers):
            self._workers.spawn(f"metadata-{i}", self._worker, i)

    def stop(self, timeout_s: float = 45.0) -> None:
        self._workers.stop(timeout_s)

    def _worker(self, process: int) -> None:
        asyncio.run(self._main(process))

    async def _main(self, process: int) -> None:
        from reference_broker.client import Cluster

        rng = random.Random(self.seed * 1000 + process)
        cluster = Cluster(self.bootstrap, request_timeout=self.spec.request_timeout_s)
        interval = self.spec.workers / self.spec.rate
        next_at = time.monotonic()
        weights = {"create_topic": 5, "create_again": 1, "create_partitions": 3, "delete_topic": 2,
                   "elect_leaders": 2, "metadata": 6}
        n = 0
        try:
            while not self._stop.is_set():
                if not cluster.brokers:
                    try:
                        await cluster.refresh_metadata([])
                    except Exception as e:  # noqa: BLE001 - the cluster may be down: try again shortly
                        self._note(f"process {process} metadata refresh: {_error(e)}")
                        await asyncio.sleep(0.5)
                        continue
                kind = rng.choices(self.kinds, [weights[k] for k in self.kinds])[0]
                node = rng.choice(sorted(cluster.brokers))
                n += 1
                await self._one(cluster, process, kind, node, rng, n)
                with self._lock:
                    self.counts[kind] += 1
                next_at = max(next_at + interval, time.monotonic() - 1.0)
                await asyncio.sleep(max(0.0, next_at - time.monotonic()))
        finally:
            await cluster.close()

    def _note(self, text: str) -> None:
        if len(self.errors) < 50:
            self.errors.append(text)

    def _pick(self, rng: random.Random) -> tuple[str, int] | None:
        with self._lock:
            if not self.live:
                return None
            name = rng.choice(list(self.live))
            return name, self.live[name]

    async def _one(self, cluster: Any, process: int, kind: str, node: int, rng: random.Random, n: int) -> None:
        s = self.spec
        if kind == "metadata":
            with self._lock:
                names = self.names[-s.read_topics:]
            if names:
                await self.read(cluster, process, node, names)
            return
        picked = self._pick(rng)
        if kind == "create_topic" or picked is None:
            name = f"md-{self.recorder.history.run_id}-{process}-{n}"
            with self._lock:
                self.names.append(name)
                self.live[name] = parts = rng.randint(1, s.max_partitions)
            await self._create(cluster, process, node, name, parts)
            return
        name, parts = picked
        if kind == "create_again":
            await self._create(cluster, process, node, name, parts)
        elif kind == "create_partitions":
            with self._lock:
                if name in self.live:
                    self.live[name] = max(self.live[name], parts + 1)
            await self._grow(cluster, process, node, name, parts + 1)
        elif kind == "delete_topic":
            with self._lock:
                self.live.pop(name, None)
                self.deleted.add(name)
            await self._delete(cluster, process, node, name)
        else:
            await self._elect(cluster, process, node, name, rng.randrange(parts))

    async def _request(self, cluster: Any, node: int, req: Any, api: int) -> Any:
        conn = await cluster.connection(node)
        version = conn.versions.get(api)
        if version is None:
            raise E.UnsupportedVersionError(f"broker {node} does not serve api {api}")
        return (await conn.request(req, version, self.spec.request_timeout_s)).body

    async def _write(self, cluster: Any, process: int, f: str, node: int, value: dict, req: Any, api: int,
                     code_of: Any) -> None:
        """One admin request: invoke, send, and ok / fail (definite refusal) / info (unknown outcome)."""
        self.recorder.invoke(process, f, value)
        try:
            body = await self._request(cluster, node, req, api)
            code, message = code_of(body)
        except (TimeoutError, OSError, E.KafkaError, asyncio.IncompleteReadError) as e:
            self.recorder.info(process, f, {**value, "node": node, "error": _error(e)})
            self.stats.count("info")
            if not isinstance(e, E.UnsupportedVersionError):
                await self._forget(cluster, node)
            return
        out = {**value, "node": node}
        if f == "elect_leaders" and code in ELECTED:
            self.recorder.ok(process, f, {**out, "code": code})
            self.stats.count("ok")
        elif code == 0:
            self.recorder.ok(process, f, out)
            self.stats.count("ok")
        elif code in DEFINITE:
            self.recorder.fail(process, f, {**out, "code": code, "error": (message or "")[:200]})
            self.stats.count("fail")
        else:
            self.recorder.info(process, f, {**out, "code": code, "error": (message or "")[:200]})
            self.stats.count("info")

    async def _forget(self, cluster: Any, node: int) -> None:
        """Drop a broken connection so the next request to that broker reconnects."""
        conn = cluster._conns.pop(node, None)
        if conn is not None:
            try:
                await conn.close()
            except Exception:  # noqa: BLE001 - it is broken already
                pass

    async def _create(self, cluster: Any, process: int, node: int, name: str, parts: int) -> None:
        T = CreateTopicsRequest.CreatableTopic
        req = CreateTopicsRequest(topics=[T(name=name, num_partitions=parts, replication_factor=self.spec.replication,
                                            assignments=[], configs=[])],
                                  timeout_ms=int(self.spec.request_timeout_s * 1000) - 2000, validate_only=False)

        def code_of(body: Any) -> tuple[int, str | None]:
            t = body.topics[0]
            return t.error_code, getattr(t, "error_message", None)

        await self._write(cluster, process, "create_topic", node,
                          {"topic": name, "partitions": parts, "replication": self.spec.replication}, req,
                          CREATE_TOPICS, code_of)

    async def _delete(self, cluster: Any, process: int, node: int, name: str) -> None:
        conn_version = None
        try:
            conn_version = (await cluster.connection(node)).versions.get(DELETE_TOPICS)
        except Exception:  # noqa: BLE001 - _write records the failure to connect
            pass
        if conn_version is not None and conn_version >= 6:
            req = DeleteTopicsRequest(topics=[DeleteTopicsRequest.DeleteTopicState(name=name)],
                                      timeout_ms=int(self.spec.request_timeout_s * 1000) - 2000)
        else:
            req = DeleteTopicsRequest(topic_names=[name], timeout_ms=int(self.spec.request_timeout_s * 1000) - 2000)

        def code_of(body: Any) -> tuple[int, str | None]:
            r = body.responses[0]
            return r.error_code, getattr(r, "error_message", None)

        await self._write(cluster, process, "delete_topic", node, {"topic": name}, req, DELETE_TOPICS, code_of)

    async def _grow(self, cluster: Any, process: int, node: int, name: str, count: int) -> None:
        T = CreatePartitionsRequest.CreatePartitionsTopic
        req = CreatePartitionsRequest(topics=[T(name=name, count=count, assignments=None)],
                                      timeout_ms=int(self.spec.request_timeout_s * 1000) - 2000, validate_only=False)

        def code_of(body: Any) -> tuple[int, str | None]:
            r = body.results[0]
            return r.error_code, r.error_message

        await self._write(cluster, process, "create_partitions", node, {"topic": name, "count": count}, req,
                          CREATE_PARTITIONS, code_of)

    async def _elect(self, cluster: Any, process: int, node: int, name: str, partition: int) -> None:
        T = ElectLeadersRequest.TopicPartitions
        req = ElectLeadersRequest(election_type=0, topic_partitions=[T(topic=name, partitions=[partition])],
                                  timeout_ms=int(self.spec.request_timeout_s * 1000) - 2000)

        def code_of(body: Any) -> tuple[int, str | None]:
            if getattr(body, "error_code", 0):
                return body.error_code, None
            r = body.replica_election_results[0].partition_result[0]
            return r.error_code, r.error_message

        await self._write(cluster, process, "elect_leaders", node, {"topic": name, "partition": partition}, req,
                          ELECT_LEADERS, code_of)

    async def read(self, cluster: Any, process: int, node: int, names: list[str], final: bool = False) -> dict | None:
        """One Metadata read of ``names`` from broker ``node``: ok ``{topics: {name: count or null}, leaders}``."""
        inv = {"topics": list(names), "node": node}
        self.recorder.invoke(process, "metadata", inv)
        try:
            conn = await cluster.connection(node)
            version = conn.versions.get(METADATA)
            kw: dict[str, Any] = {"topics": [MetadataRequest.MetadataRequestTopic(name=n) for n in names]}
            if version is not None and version >= 4:
                kw["allow_auto_topic_creation"] = False
            body = (await conn.request(MetadataRequest(**kw), version, self.spec.request_timeout_s)).body
        except (TimeoutError, OSError, E.KafkaError, asyncio.IncompleteReadError) as e:
            self.recorder.fail(process, "metadata", {**inv, "error": _error(e)})
            self.stats.count("fail")
            await self._forget(cluster, node)
            return None
        view: dict[str, int | None] = {}
        leaders: dict[str, list[int]] = {}
        errors: dict[str, int] = {}
        for t in body.topics:
            if t.error_code == 0:
                view[t.name] = len(t.partitions)
                leaders[t.name] = [p.leader_id for p in sorted(t.partitions, key=lambda p: p.partition_index)]
            elif t.error_code == E.UnknownTopicOrPartitionError.errno:
                view[t.name] = None
            else:   # e.g. LEADER_NOT_AVAILABLE: says nothing about presence; kept as evidence, not as a view
                errors[t.name] = t.error_code
        out: dict[str, Any] = {**inv, "topics": view, "leaders": leaders}
        if errors:
            out["errors"] = errors
        if final:
            out["final"] = True
        self.recorder.ok(process, "metadata", out)
        self.stats.count("ok")
        return view

    # -- after the faults
    def final_read(self, process: int) -> dict[str, Any]:
        """Read every topic of the run from every broker until all agree (bounded by ``final_timeout_s``), and
        record that round as the final reads. Returns {"complete", "converged", "rounds", "topics", "brokers"}."""
        return asyncio.run(self._final(process))

    async def _final(self, process: int) -> dict[str, Any]:
        from reference_broker.client import Cluster

        names = list(self.names)
        cluster = Cluster(self.bootstrap, request_timeout=self.spec.request_timeout_s)
        deadline = time.monotonic() + self.spec.final_timeout_s
        rounds = 0
        converged = False
        try:
            while True:
                rounds += 1
                try:
                    await cluster.refresh_metadata([])
                except Exception as e:  # noqa: BLE001 - not back yet: try again until the deadline
                    self._note(f"final read: {_error(e)}")
                nodes = sorted(cluster.brokers)
                views = {}
                for node in nodes:
                    views[node] = await self._peek(cluster, node, names)
                got = [v for v in views.values() if v is not None]
                converged = bool(nodes) and len(got) == len(nodes) and all(v == got[0] for v in got) and \
                    all(len(v) == len(names) for v in got)
                if converged or time.monotonic() >= deadline:
                    break
                await asyncio.sleep(0.5)
            # the round that counts, recorded (reads changing nothing: a recorded round equals what was compared)
            final_views = {node: await self.read(cluster, process, node, names, final=True) for node in nodes}
        finally:
            await cluster.close()
        got = [v for v in final_views.values() if v is not None]
        converged = converged and len(got) == len(final_views) and all(v == got[0] for v in got)
        return {"complete": converged, "converged": converged, "rounds": rounds, "topics": len(names),
                "brokers": sorted(final_views)}

    async def _peek(self, cluster: Any, node: int, names: list[str]) -> dict | None:
        """An unrecorded read (for the convergence wait only; the final round is recorded)."""
        try:
            conn = await cluster.connection(node)
            version = conn.versions.get(METADATA)
            kw: dict[str, Any] = {"topics": [MetadataRequest.MetadataRequestTopic(name=n) for n in names]}
            if version is not None and version >= 4:
                kw["allow_auto_topic_creation"] = False
            body = (await conn.request(MetadataRequest(**kw), version, self.spec.request_timeout_s)).body
        except (TimeoutError, OSError, E.KafkaError, asyncio.IncompleteReadError):
            await self._forget(cluster, node)
            return None
        return {t.name: (len(t.partitions) if t.error_code == 0 else None) for t in body.topics
                if t.error_code in (0, E.UnknownTopicOrPartitionError.errno)}
