"""The reference cluster's controllers as a KIP-595 Raft quorum: three dedicated controller processes (voters
1000..1002) and three brokers, real processes and sockets (``Cluster(controllers=3)``).

What is checked, each rule with the fault switch that breaks it (KCT_CLUSTER_FAULTS=NAME runs the module with it):
- QUORUM-ONE-LEADER: DescribeQuorum from every controller agrees on one leader and epoch (only the leader describes,
  the others answer NOT_LEADER_OR_FOLLOWER naming it), and every broker forwards it to that leader.
- QUORUM-ONLY-LEADER-ACTIVE (KafkaRaftClient + QuorumController: only the leader is active): a controller that is not
  the leader answers NOT_CONTROLLER to BrokerHeartbeat and CreateTopics. Switch quorum.follower_acts_active.
- QUORUM-FAILOVER (KIP-595): kill -9 / SIGSTOP of the active controller -> a new leader in DescribeQuorum within a
  bound derived from controller.quorum.fetch.timeout.ms and election.timeout.ms; then a topic can be created, and a
  partition whose leader broker dies gets a new leader.
- QUORUM-FAILOVER-RESUMES-FENCING (BrokerHeartbeatManager from activation): a broker that died together with the
  active controller (it never heartbeats to the new one) is fenced by the new one and its partition gets a new
  leader. Switch quorum.no_session_rearm.
- QUORUM-REJOIN / QUORUM-NO-COMMITTED-LOSS: the killed controller restarted (and the paused one resumed) follows the
  new leader and catches up; all three killed and restarted come back from disk with every committed topic; at the
  end every controller's durable metadata log holds the same records below the high watermark, with every topic
  that was acknowledged.
"""
from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import NewTopic
from kafka import errors as E
from kafka.protocol.admin import CreatePartitionsRequest, CreateTopicsRequest, DescribeQuorumRequest
from kct_cluster_helpers import FAST, Wires, admin, create_topic, leader_state, partition_state, wait_for

from conformance.cluster import LOAD_FACTOR, SLACK_S, await_new_leader, election_bound_s
from reference_broker.client.protocol import Connection
from reference_broker.cluster import Cluster
from reference_broker.config import DEFAULTS
from reference_broker.controller.messages import BrokerHeartbeatRequest
from reference_broker.controller.quorum import decode_entries
from reference_broker.log.file import FileLog, FileLogConfig
from reference_broker.metadata.records import METADATA_TOPIC

pytestmark = pytest.mark.timeout(600)

NOT_CONTROLLER = E.NotControllerError.errno
NOT_LEADER = E.NotLeaderForPartitionError.errno     # Kafka's NOT_LEADER_OR_FOLLOWER
SETTINGS = {**FAST, "min.insync.replicas": "1"}


def quorum_bound_s(settings: dict[str, str]) -> float:
    """How long a new quorum leader may take after the old one stopped answering: the followers' fetch timeout runs
    out (a pre-vote is refused while a voter still heard from the leader, so up to two fetch timeouts), then a
    pre-vote and vote round with up to 2 x the election timeout of jitter, and a lost round's backoff. Times
    LOAD_FACTOR, plus SLACK_S, as conformance.cluster's election bound."""
    def ms(key: str) -> int:
        return int(settings.get(key, DEFAULTS[key][1]))
    promise = (2 * ms("controller.quorum.fetch.timeout.ms") + 2 * ms("controller.quorum.election.timeout.ms")
               + ms("controller.quorum.election.backoff.max.ms"))
    return LOAD_FACTOR * promise / 1000 + SLACK_S


def _dq_request() -> DescribeQuorumRequest:
    T = DescribeQuorumRequest.TopicData
    return DescribeQuorumRequest(topics=[T(topic_name=METADATA_TOPIC, partitions=[T.PartitionData(partition_index=0)])])


async def _ask(port: int, request, version: int, timeout: float = 5.0):
    async with await Connection.connect("127.0.0.1", port, timeout=timeout) as c:
        return (await c.request(request, version, timeout=timeout)).body


def describe_quorum(port: int) -> tuple[int, int, int, int, dict[int, int]] | str:
    """(error, leader id, leader epoch, high watermark, {voter: log end offset}) from the node on ``port``, or the
    failure as text (a killed or paused node)."""
    try:
        r = asyncio.run(_ask(port, _dq_request(), 2))
    except Exception as e:  # noqa: BLE001 - a killed or paused node
        return f"{type(e).__name__}: {e}"
    if r.error_code:
        return f"error {r.error_code}"
    p = r.topics[0].partitions[0]
    return p.error_code, p.leader_id, p.leader_epoch, p.high_watermark, {v.replica_id: v.log_end_offset
                                                                        for v in p.current_voters}


def leader_of(cluster: Cluster, among: list[int] | None = None) -> tuple[int, int] | None:
    """(leader, epoch) if exactly one of the controllers ``among`` describes the quorum as its leader."""
    leaders = []
    for v in among or sorted(cluster.voters):
        d = describe_quorum(cluster.voter_ports[v])
        if isinstance(d, tuple) and d[0] == 0:
            leaders.append((d[1], d[2], v))
    if len(leaders) == 1 and leaders[0][0] == leaders[0][2]:
        return leaders[0][0], leaders[0][1]
    return None


def wait_leader(cluster: Cluster) -> tuple[int, int]:
    """(leader, epoch) once exactly one controller describes the quorum (bounded: an election may be under way)."""
    return wait_for(lambda: leader_of(cluster), lambda x: x is not None, quorum_bound_s(SETTINGS), "a quorum leader")[0]


@pytest.fixture(scope="module")
def quorum(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    faults = [f for f in os.environ.get("KCT_CLUSTER_FAULTS", "").split(",") if f]
    work = tmp_path_factory.mktemp("quorum")
    c = Cluster(3, data_dir=work / "data", work_dir=work, config=SETTINGS, faults=faults, controllers=3)
    c.start()
    try:
        wait_for(lambda: leader_of(c), lambda x: x is not None, quorum_bound_s(SETTINGS), "a quorum leader")
        yield c
    finally:
        c.stop()


def _wait_new_leader(c: Cluster, old: int, old_epoch: int) -> tuple[tuple[int, int], float]:
    others = [v for v in sorted(c.voters) if v != old]
    return wait_for(lambda: leader_of(c, others), lambda x: x is not None and x[0] != old and x[1] > old_epoch,
                    quorum_bound_s(SETTINGS), f"a new quorum leader after {old} stopped")


def _partition_leader_dies(c: Cluster, topic: str, extra_s: float = 0.0) -> int:
    """Kill the leader broker of ``topic``-0; return the new leader once it serves (bounded by the settings)."""
    old, _, _ = partition_state(c.bootstrap, topic)
    before = leader_state(c, topic, old)
    c.kill(old)

    async def wait() -> int:
        nodes = Wires(c)
        try:
            others = [b for b in c.broker_ids if b != old]
            st, _w, _ = await await_new_leader(nodes.to, nodes.drop, lambda: others, topic, before,
                                               avoid=lambda: {old}, bound_s=election_bound_s(SETTINGS) + extra_s)
            return st.leader
        finally:
            await nodes.close()
    try:
        return asyncio.run(wait())
    finally:
        c.restart(old)


def test_every_controller_and_broker_name_one_leader(quorum: Cluster) -> None:
    c = quorum
    leader, epoch = wait_leader(c)
    for v in sorted(c.voters):
        d = describe_quorum(c.voter_ports[v])
        assert isinstance(d, tuple), d
        if v == leader:
            assert d[:3] == (0, leader, epoch) and sorted(d[4]) == sorted(c.voters), d
        else:   # KafkaRaftClient.handleDescribeQuorumRequest: only the leader describes
            assert d[:3] == (NOT_LEADER, leader, epoch), (v, d)
    for b in c.broker_ids:      # brokers forward DescribeQuorum to the active controller
        d = describe_quorum(c.ports[b])
        assert isinstance(d, tuple) and d[:3] == (0, leader, epoch), (b, d)
    # v2 error_message where there is no error: "" (Kafka's generated default for a string field), at the top level
    # and the partition's from the leader (also forwarded by a broker), the top level's from a follower (before:
    # null, which the differential mode showed against Kafka 4.4.0)
    for port in (c.voter_ports[leader], c.ports[c.broker_ids[0]]):
        r = asyncio.run(_ask(port, _dq_request(), 2))
        assert (r.error_message, r.topics[0].partitions[0].error_message) == ("", ""), r
    follower = next(v for v in c.voters if v != leader)
    r = asyncio.run(_ask(c.voter_ports[follower], _dq_request(), 2))
    assert r.error_message == "" and r.topics[0].partitions[0].error_code == NOT_LEADER, r


def test_only_the_leader_is_the_active_controller(quorum: Cluster) -> None:
    c = quorum
    leader, _ = wait_leader(c)
    T = CreateTopicsRequest.CreatableTopic
    for v in sorted(c.voters):
        if v == leader:
            continue
        hb = asyncio.run(_ask(c.voter_ports[v], BrokerHeartbeatRequest(
            broker_id=0, broker_epoch=-1, current_metadata_offset=0, want_fence=False, want_shut_down=False), 0))
        assert hb.error_code == NOT_CONTROLLER, (v, hb)
        ct = asyncio.run(_ask(c.voter_ports[v], CreateTopicsRequest(
            topics=[T(name=f"not-active-{v}", num_partitions=1, replication_factor=1, assignments=[], configs=[])],
            timeout_ms=5000, validate_only=False), 7))
        assert [t.error_code for t in ct.topics] == [NOT_CONTROLLER], (v, ct)


def test_kill_active_controller(quorum: Cluster) -> None:
    c = quorum
    create_topic(c.bootstrap, "steady", rf=3)
    producer = Producer({"bootstrap.servers": c.bootstrap, "acks": "all", "enable.idempotence": True})
    old, epoch = wait_leader(c)
    t0 = time.monotonic()
    c.kill(old)
    try:
        # the brokers keep serving data while the quorum elects: acks=all writes complete without any controller
        errors: list = []
        for _ in range(20):
            producer.produce("steady", b"x", on_delivery=lambda err, _m: errors.append(err))
        assert producer.flush(30) == 0 and errors == [None] * 20, errors
        acked_s = time.monotonic() - t0
        (new, new_epoch), took = _wait_new_leader(c, old, epoch)
        create_topic(c.bootstrap, "after-kill", rf=3)
        _partition_leader_dies(c, "after-kill")
    finally:
        c.restart(old)
    # the restarted controller follows the new leader (or a later one) and catches up with its log
    wait_for(lambda: describe_quorum(c.voter_ports[old]), lambda d: isinstance(d, tuple) and d[0] == NOT_LEADER
             and d[1] != old and d[1] >= 0, quorum_bound_s(SETTINGS), f"controller {old} following after restart")
    print(f"kill -9 of {old} (epoch {epoch}): 20 acks=all records acked after {acked_s:.2f} s; "
          f"leader {new} (epoch {new_epoch}) after {took:.2f} s; "
          f"total {time.monotonic() - t0:.1f} s")


def test_pause_active_controller_with_a_partition_leader_down(quorum: Cluster) -> None:
    """SIGSTOP the active controller and kill -9 a partition's leader broker at the same moment: the broker never
    heartbeats to the new controller, which must fence it from the session it gave it on becoming active."""
    c = quorum
    create_topic(c.bootstrap, "before-pause", rf=3)
    victim, _, _ = partition_state(c.bootstrap, "before-pause")
    before = leader_state(c, "before-pause", victim)
    old, epoch = wait_leader(c)
    c.pause(old)
    c.kill(victim)
    try:
        (_new, _e), _took = _wait_new_leader(c, old, epoch)

        async def wait() -> int:
            nodes = Wires(c)
            try:
                others = [b for b in c.broker_ids if b != victim]
                st, _w, _ = await await_new_leader(
                    nodes.to, nodes.drop, lambda: others, "before-pause", before, avoid=lambda: {victim},
                    bound_s=election_bound_s(SETTINGS) + quorum_bound_s(SETTINGS))
                return st.leader
            finally:
                await nodes.close()
        assert asyncio.run(wait()) != victim
        create_topic(c.bootstrap, "after-pause", rf=2)
    finally:
        c.resume(old)
        c.restart(victim)
    wait_for(lambda: describe_quorum(c.voter_ports[old]), lambda d: isinstance(d, tuple) and d[0] == NOT_LEADER
             and d[1] != old and d[1] >= 0, quorum_bound_s(SETTINGS), f"controller {old} following after resume")


def test_every_controller_killed_and_restarted(quorum: Cluster) -> None:
    """kill -9 of all three controllers, then a restart of each from its data dir: the quorum comes back from the
    durable metadata logs and quorum-state files (a newer epoch), with every committed topic, and serves again."""
    c = quorum
    _leader, epoch = wait_leader(c)
    for v in sorted(c.voters):
        c.kill(v)
    for v in sorted(c.voters):
        c.restart(v)
    (_new, new_epoch), _took = wait_for(lambda: leader_of(c), lambda x: x is not None and x[1] > epoch,
                                        quorum_bound_s(SETTINGS), "a quorum leader after every controller restarted")
    a = admin(c.bootstrap)
    fut = a.create_topics([NewTopic("after-kill", 1, 3)])["after-kill"]
    with pytest.raises(KafkaException, match="TOPIC_ALREADY_EXISTS"):
        fut.result(60)
    create_topic(c.bootstrap, "after-full-restart", rf=3)


def test_kafka_metadata_quorum_tool(quorum: Cluster) -> None:
    """Apache Kafka 4.4.0's own `kafka-metadata-quorum --bootstrap-server ... describe --status / --replication`
    (and `--bootstrap-controller` with --status) against the reference quorum (skipped where the tools are not cached: `python -m fixtures.kafka_install
    --tools`)."""
    from fixtures.kafka_install import DEFAULT_VERSION, installed_tools

    tools = installed_tools(DEFAULT_VERSION)
    if tools is None:
        pytest.skip("Apache Kafka's tools are not cached (python -m fixtures.kafka_install --tools)")
    c = quorum

    def run(*args: str, bootstrap: tuple[str, str] = ("--bootstrap-server", c.bootstrap)) -> str:
        out = subprocess.run(tools.command("kafka-metadata-quorum", *bootstrap, "describe", *args),
                             capture_output=True, text=True, timeout=180)
        assert out.returncode == 0, f"kafka-metadata-quorum {bootstrap[0]} describe {args}: {out.stderr[-2000:]}"
        return out.stdout
    leader, epoch = wait_leader(c)
    status = dict(line.split(":", 1) for line in run("--status").splitlines() if ":" in line)
    # KIP-919: the same from a controller that is not the leader (DescribeCluster names the active one)
    follower = next(v for v in sorted(c.voters) if v != leader)
    via_controller = dict(line.split(":", 1) for line in run(
        "--status", bootstrap=("--bootstrap-controller", f"127.0.0.1:{c.voter_ports[follower]}")).splitlines()
        if ":" in line)
    assert int(via_controller["LeaderId"]) == leader and via_controller["CurrentVoters"] == status["CurrentVoters"]
    assert int(status["LeaderId"]) == leader and int(status["LeaderEpoch"]) == epoch, status
    voters = json.loads(status["CurrentVoters"])
    assert sorted(v["id"] for v in voters) == sorted(c.voters), voters
    assert all(v["endpoints"] == [f"CONTROLLER://127.0.0.1:{c.voter_ports[v['id']]}"] for v in voters), voters
    assert sorted(o["id"] for o in json.loads(status["CurrentObservers"])) == c.broker_ids, status
    rows = [line.split() for line in run("--replication").splitlines()[1:] if line.strip()]
    roles = {int(r[0]): r[-1] for r in rows}
    assert roles == {leader: "Leader", **{v: "Follower" for v in c.voters if v != leader},
                     **{b: "Observer" for b in c.broker_ids}}, rows


def test_no_change_acknowledged_before_it_is_committed(quorum: Cluster) -> None:
    """QUORUM-ACK-AFTER-COMMIT (KIP-595 / QuorumController: a write's future completes when Raft commits its
    offset): with both followers frozen the leader can append a CreatePartitions record but never commit it, so it
    must not answer success (here: NOT_CONTROLLER once it gives up or resigns). Found by a chaos run (metadata
    workload, pause-controller on the reference quorum: a CreatePartitions acknowledged 20 ms before its controller
    froze was gone after the failover, partitions-shrunk); before the fix the answer was success within
    milliseconds, since the controller waited for brokers to apply the committed offset, which the new record was not
    part of yet."""
    c = quorum
    create_topic(c.bootstrap, "grow-uncommitted", rf=3)
    leader, _ = wait_leader(c)
    followers = [v for v in c.voters if v != leader]
    CP = CreatePartitionsRequest
    for v in followers:
        c.pause(v)
    try:
        r = asyncio.run(_ask(c.voter_ports[leader], CP(
            topics=[CP.CreatePartitionsTopic(name="grow-uncommitted", count=2, assignments=None)],
            timeout_ms=30_000, validate_only=False), 3, timeout=60.0))
        assert [x.error_code for x in r.results] == [NOT_CONTROLLER], r
    finally:
        for v in followers:
            c.resume(v)
    wait_leader(c)


def test_committed_metadata_identical_on_every_controller(quorum: Cluster) -> None:
    c = quorum
    leader, epoch = wait_leader(c)
    d = describe_quorum(c.voter_ports[leader])
    hw = d[3]
    # every voter has fetched up to the high watermark (the leader's view of their log end offsets)
    wait_for(lambda: describe_quorum(c.voter_ports[leader]), lambda x: isinstance(x, tuple) and x[0] == 0
             and min(x[4].values()) >= hw, quorum_bound_s(SETTINGS), "every voter at the high watermark")
    # the quorum-state file of every voter names the current epoch (Kafka's FileQuorumStateStore)
    for v in sorted(c.voters):
        doc = json.loads((c.data_dir / f"controller-{v}" / "quorum-state").read_text())
        assert doc["leaderEpoch"] >= epoch, (v, doc)
    c.stop()        # the logs are read from disk: a graceful stop (the next tests of the module would restart)
    logs = {}
    for v in sorted(c.voters):
        fl = FileLog(Path(c.data_dir / f"controller-{v}" / f"{METADATA_TOPIC}-0"), FileLogConfig())
        try:
            logs[v] = decode_entries(bytes(fl.read(0, 64 << 20, hw, True).data)) if hw > 0 else ()
        finally:
            fl.close()
    ref = logs[leader]
    assert len(ref) == hw and [e.offset for e in ref] == list(range(hw))
    for v, entries in logs.items():
        assert entries == ref, f"controller {v}'s committed log differs from the leader's below HW {hw}"
    names = {e.data["name"] for e in ref if e.data["type"] == "topic"}
    assert {"after-kill", "before-pause", "after-pause", "after-full-restart"} <= names, names
    assert not any(n.startswith("not-active-") for n in names), names


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("KCT_SLOW"), reason="runs this module's cluster twice more (~3 min): KCT_SLOW=1")
@pytest.mark.parametrize(("fault", "select"), [("quorum.follower_acts_active", "only_the_leader_is_the_active"),
                                               ("quorum.no_session_rearm", "pause_active_controller")])
def test_fault_switch_is_caught(fault: str, select: str) -> None:
    """Each switch (reference_broker/faults.py) makes exactly the check of the rule it breaks fail."""
    env = {**os.environ, "KCT_CLUSTER_FAULTS": fault, "KCT_SLOW": ""}
    out = subprocess.run([sys.executable, "-m", "pytest", __file__, "-q", "-p", "no:cacheprovider", "-k", select],
                         env=env, capture_output=True, text=True, timeout=900, cwd=Path(__file__).parent)
    assert "1 failed" in out.stdout, out.stdout[-3000:]
