"""KafkaRaftClient driven message by message: the KIP-595 / KIP-996 rules one at a time, with no simulation."""
from __future__ import annotations

import ast
import json
import pathlib
import random

import pytest

from reference_broker.raft import messages as M
from reference_broker.raft.client import KafkaRaftClient, NotLeaderError, RaftConfig, RecordingListener
from reference_broker.raft.log import MemoryRaftLog
from reference_broker.raft.quorum_state import (
    CandidateState,
    ElectionState,
    FileQuorumStateStore,
    FollowerState,
    LeaderState,
    MemoryQuorumStateStore,
    ProspectiveState,
    ResignedState,
    UnattachedState,
)

VOTERS = (1, 2, 3)


def node(node_id: int, voters: tuple[int, ...] = VOTERS, store=None, log=None, now: int = 0,
         listener=None) -> KafkaRaftClient:
    return KafkaRaftClient(RaftConfig(node_id=node_id, voters=voters), log if log is not None else MemoryRaftLog(),
                           store if store is not None else MemoryQuorumStateStore(), random.Random(node_id), now,
                           listener)


def msg(src: int, dst: int, body, corr: int = 1) -> M.RaftMessage:
    return M.RaftMessage(src, dst, corr, body)


def reply(n: KafkaRaftClient, out: list[M.RaftMessage], src: int, body_for, now: int = 10_000
          ) -> list[M.RaftMessage]:
    """Answer every message ``n`` sent to ``src`` with ``body_for(request body)``."""
    res = []
    for m in out:
        if m.dst == src:
            res += n.handle(M.RaftMessage(src, n.id, m.correlation_id, body_for(m.body)), now)
    return res


def elect(n: KafkaRaftClient, now: int = 10_000) -> int:
    """Make ``n`` leader with voter 2's pre-vote and vote. Returns its epoch."""
    out, _ = n.poll(now)
    assert isinstance(n.state, ProspectiveState)
    out = reply(n, out, 2, lambda b: M.VoteResponse(M.NONE, n.epoch, None, True, pre_vote=True), now)
    assert isinstance(n.state, CandidateState)
    out2, _ = n.poll(now)
    reply(n, out + out2, 2, lambda b: M.VoteResponse(M.NONE, n.epoch, None, True), now)
    assert isinstance(n.state, LeaderState)
    return n.epoch


def test_single_voter_elects_itself_writes_leader_change_and_commits() -> None:
    listener = RecordingListener()
    n = node(1, voters=(1,), listener=listener)
    out, deadline = n.poll(0)
    assert isinstance(n.state, UnattachedState) and 1000 <= deadline < 2000  # timeout + jitter below timeout
    n.poll(deadline)
    assert isinstance(n.state, LeaderState) and n.epoch == 1
    first = n.log.entry(0)
    assert first is not None and first.control and first.epoch == 1
    off, _ = n.append("rec", deadline)
    assert off == 1 and n.log.end_offset() == 1 and n.high_watermark == 1  # lingering in memory
    _, wake = n.poll(deadline)
    assert wake == deadline + 25  # controller.quorum.append.linger.ms
    n.poll(wake)
    assert n.log.end_offset() == 2 and n.high_watermark == 2
    assert [e.data for e in listener.committed][1:] == ["rec"]
    assert listener.leader_changes[-1] == (1, 1)


def test_a_crash_loses_only_what_was_never_written() -> None:
    """The accumulator is memory: a leader that dies within the linger loses those appends (never committed), while
    the log and quorum-state it wrote survive, and it comes back resigned in its epoch."""
    store, log = MemoryQuorumStateStore(), MemoryRaftLog()
    n = node(1, voters=(1,), store=store, log=log)
    n.poll(5_000)
    n.append("written", 5_000)
    n.poll(5_025)
    n.append("lingering", 5_030)
    again = node(1, voters=(1,), store=store, log=log, now=5_031)
    assert [e.data for e in log.entries][1:] == ["written"]
    assert isinstance(again.state, ResignedState) and again.epoch == 1


def test_prevote_changes_no_epoch_and_writes_nothing() -> None:
    store = MemoryQuorumStateStore()
    n = node(2, store=store)
    writes = store.writes
    out = n.handle(msg(1, 2, M.VoteRequest(1, 1, 0, 0, pre_vote=True)), 5)
    assert out[0].body == M.VoteResponse(M.NONE, 0, None, True, pre_vote=True)
    assert n.epoch == 0 and store.writes == writes


def test_prospective_asks_prevotes_for_epoch_plus_one_then_stands() -> None:
    n = node(1)
    out, _ = n.poll(10_000)
    assert isinstance(n.state, ProspectiveState) and n.epoch == 0
    reqs = [m.body for m in out]
    assert reqs and all(isinstance(r, M.VoteRequest) and r.pre_vote and r.candidate_epoch == 1 for r in reqs)
    assert sorted(m.dst for m in out) == [2, 3]
    reply(n, out, 2, lambda b: M.VoteResponse(M.NONE, 0, None, True, pre_vote=True))
    assert isinstance(n.state, CandidateState) and n.epoch == 1
    assert n.store.read() == ElectionState(1, 1, None)  # the candidate's own vote is persisted first


def test_lost_prevote_backs_off_without_bumping_the_epoch() -> None:
    n = node(1)
    out, _ = n.poll(10_000)
    reply(n, out, 2, lambda b: M.VoteResponse(M.NONE, 0, None, False, pre_vote=True))
    reply(n, out, 3, lambda b: M.VoteResponse(M.NONE, 0, None, False, pre_vote=True))
    assert isinstance(n.state, UnattachedState) and n.epoch == 0


def _follow(n: KafkaRaftClient, leader: int, epoch: int, now: int) -> None:
    """Make ``n`` a follower of ``leader`` with one successful fetch at ``now``."""
    n.handle(msg(leader, n.id, M.BeginQuorumEpochRequest(epoch, leader)), now)
    out, _ = n.poll(now)
    fetch = [m for m in out if isinstance(m.body, M.FetchRequest)]
    assert fetch and fetch[0].dst == leader
    n.handle(M.RaftMessage(leader, n.id, fetch[0].correlation_id,
                           M.FetchResponse(M.NONE, epoch, leader, high_watermark=-1)), now)


def test_follower_refuses_prevote_while_it_hears_from_its_leader() -> None:
    """KIP-996: a voter that fetched from a leader within controller.quorum.fetch.timeout.ms refuses pre-votes, so
    a node that merely lost its own connection cannot start an election that disturbs the quorum."""
    n = node(2)
    _follow(n, 1, 1, now=100)
    out = n.handle(msg(3, 2, M.VoteRequest(2, 3, 0, 0, pre_vote=True), corr=7), 500)
    assert out[0].body.vote_granted is False
    out = n.handle(msg(3, 2, M.VoteRequest(2, 3, 0, 0, pre_vote=True), corr=8), 100 + 2000)
    assert out[0].body.vote_granted is True
    assert n.epoch == 1 and isinstance(n.state, FollowerState)


def test_vote_is_persisted_before_the_answer_and_survives_a_restart(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "quorum-state"
    store = FileQuorumStateStore(str(path))
    log = MemoryRaftLog()
    n = node(3, store=store, log=log)
    out = n.handle(msg(1, 3, M.VoteRequest(1, 1, 0, 0)), 10)
    assert out[0].body.vote_granted
    assert json.loads(path.read_text())["votedId"] == 1 and json.loads(path.read_text())["leaderEpoch"] == 1
    again = node(3, store=FileQuorumStateStore(str(path)), log=log, now=20)  # crash + restart
    assert again.epoch == 1 and again.state.voted_for == 1
    assert again.handle(msg(2, 3, M.VoteRequest(1, 2, 0, 0)), 30)[0].body.vote_granted is False
    assert again.handle(msg(1, 3, M.VoteRequest(1, 1, 0, 0), corr=2), 30)[0].body.vote_granted is True


def test_vote_refused_to_a_candidate_with_a_less_complete_log() -> None:
    log = MemoryRaftLog()
    log.append_as_leader(1, "a")
    log.append_as_leader(1, "b")
    n = node(3, log=log, store=MemoryQuorumStateStore())
    for last_epoch, last_offset, granted in ((1, 1, False), (0, 5, False), (1, 2, True)):
        cand = 1 if granted else 2
        out = n.handle(msg(cand, 3, M.VoteRequest(2, cand, last_epoch, last_offset)), 10)
        assert out[0].body.vote_granted is granted
    assert n.epoch == 2  # a real vote request of a higher epoch moves the voter on, granted or not


def test_vote_from_an_older_epoch_is_fenced() -> None:
    n = node(3)
    n.handle(msg(1, 3, M.VoteRequest(4, 1, 0, 0)), 10)
    out = n.handle(msg(2, 3, M.VoteRequest(3, 2, 0, 0), corr=2), 11)
    assert out[0].body == M.VoteResponse(M.FENCED_LEADER_EPOCH, 4, None, False)


def test_fetch_errors_name_the_epoch_problem() -> None:
    leader = node(1)
    epoch = elect(leader)
    f = node(2)
    f.handle(msg(1, 2, M.BeginQuorumEpochRequest(epoch, 1)), 0)
    cases = [(leader, epoch - 1, M.FENCED_LEADER_EPOCH), (leader, epoch + 1, M.UNKNOWN_LEADER_EPOCH),
             (f, epoch, M.NOT_LEADER_OR_FOLLOWER)]
    for target, req_epoch, error in cases:
        out = target.handle(msg(3, target.id, M.FetchRequest(3, req_epoch, 0, 0)), 10_001)
        assert out[0].body.error == error, M.ERROR_NAMES[error]
        assert out[0].body.leader_epoch == epoch and out[0].body.leader_id == 1


def test_diverging_epoch_makes_the_follower_truncate_then_catch_up() -> None:
    """KIP-595 Fetch: the leader answers a fetch whose (offset, last epoch) is not in its log with DivergingEpoch =
    (largest epoch <= the follower's, its end offset); the follower truncates there, keeps its HW, and refetches."""
    llog = MemoryRaftLog()
    for _ in range(2):
        llog.append_as_leader(1, "committed")
    lstore = MemoryQuorumStateStore()
    lstore.write(ElectionState(2, None, None))
    leader = node(1, log=llog, store=lstore)
    epoch = elect(leader)
    assert epoch == 3 and [e.epoch for e in llog.entries] == [1, 1, 3]
    flog = MemoryRaftLog()
    for _ in range(2):
        flog.append_as_leader(1, "committed")
    for _ in range(3):
        flog.append_as_leader(2, "never committed")  # from a deposed leader of epoch 2
    f = node(2, log=flog)
    f.handle(msg(1, 2, M.BeginQuorumEpochRequest(3, 1)), 10_000)
    out, _ = f.poll(10_000)
    for expect_offset, expect_epoch in ((5, 2), (2, 1)):
        fetch = [m for m in out if isinstance(m.body, M.FetchRequest)][0]
        assert (fetch.body.fetch_offset, fetch.body.last_fetched_epoch) == (expect_offset, expect_epoch)
        resp = [m for m in leader.handle(fetch, 10_000) if m.dst == 2][0]
        if expect_offset == 5:
            assert resp.body.diverging_epoch == (1, 2) and not resp.body.records
            assert leader.state.replicas[2].last_fetch_ms is None  # an invalid fetch acknowledges nothing
        out = f.handle(resp, 10_000)
        if expect_offset == 5:
            assert [e.epoch for e in flog.entries] == [1, 1] and f.high_watermark == 0
    assert [e.epoch for e in flog.entries] == [1, 1, 3]
    assert leader.state.replicas[2].end_offset == 2


def test_high_watermark_waits_for_an_entry_of_the_current_epoch() -> None:
    """Entries of older epochs commit only with the new leader's LeaderChange record (Raft's figure 8, Kafka's
    LeaderState.maybeUpdateHighWatermark: the HW must pass epochStartOffset)."""
    llog = MemoryRaftLog()
    llog.append_as_leader(1, "old")
    leader = node(1, log=llog)
    epoch = elect(leader)
    st = leader.state
    assert isinstance(st, LeaderState) and st.epoch_start_offset == 1
    leader.handle(msg(2, 1, M.FetchRequest(2, epoch, 1, 1)), 10_001)  # voter 2 has the old entry only
    assert st.high_watermark is None and leader.high_watermark == 0
    leader.handle(msg(2, 1, M.FetchRequest(2, epoch, 2, epoch), corr=2), 10_002)
    assert st.high_watermark == 2 and leader.high_watermark == 2


def test_observer_neither_votes_nor_counts_for_the_high_watermark() -> None:
    obs = node(4)
    out = obs.handle(msg(1, 4, M.VoteRequest(1, 1, 0, 0)), 0)
    assert out[0].body.error == M.INCONSISTENT_VOTER_SET and not out[0].body.vote_granted
    assert obs.epoch == 0
    out, _ = obs.poll(100_000)
    assert isinstance(obs.state, UnattachedState)  # an observer never becomes prospective
    assert all(isinstance(m.body, M.FetchRequest) for m in out)
    leader = node(1)
    epoch = elect(leader)
    leader.handle(msg(4, 1, M.FetchRequest(4, epoch, 1, epoch)), 10_001)
    assert leader.state.high_watermark is None
    leader.handle(msg(2, 1, M.FetchRequest(2, epoch, 1, epoch)), 10_002)
    assert leader.state.high_watermark == 1


def test_check_quorum_makes_an_unheard_leader_resign() -> None:
    leader = node(1)
    elect(leader)
    out, deadline = leader.poll(10_000)
    assert deadline <= 10_000 + 3000  # fetch timeout 2000 x 1.5
    out, _ = leader.poll(10_000 + 3000)
    assert isinstance(leader.state, ResignedState)
    with pytest.raises(NotLeaderError):
        leader.append("x", 13_000)
    ends = [m for m in out if isinstance(m.body, M.EndQuorumEpochRequest)]
    assert sorted(m.dst for m in ends) == [2, 3]
    assert leader.store.read().leader_id == 1  # quorum-state still names it: on restart it comes back resigned


def test_voters_heard_within_the_window_keep_the_leader() -> None:
    leader = node(1)
    epoch = elect(leader)
    for t in range(10_500, 20_000, 500):
        leader.handle(msg(2, 1, M.FetchRequest(2, epoch, 1, epoch), corr=t), t)
        leader.poll(t)
    assert isinstance(leader.state, LeaderState)


def test_end_quorum_epoch_first_preferred_successor_stands_at_once() -> None:
    f2, f3 = node(2), node(3)
    for f in (f2, f3):
        _follow(f, 1, 1, now=100)
        f.handle(msg(1, f.id, M.EndQuorumEpochRequest(1, 1, (3, 2)), corr=9), 200)
    _, d3 = f3.poll(200)
    assert isinstance(f3.state, ProspectiveState)  # rank 0: no backoff
    _, d2 = f2.poll(200)
    # Kafka's strictExponentialElectionBackoffMs for rank 1 of 2: (backoff.max >> (2 - 1)) << (1 - 1) = 500 ms
    assert isinstance(f2.state, UnattachedState) and d2 == 200 + 500
    pre = f2.handle(msg(3, 2, M.VoteRequest(2, 3, 0, 0, pre_vote=True), corr=10), 250)
    assert pre[0].body.vote_granted  # it forgot the resigned leader, so it grants the pre-vote


def test_leader_that_restarts_comes_back_resigned() -> None:
    store, log = MemoryQuorumStateStore(), MemoryRaftLog()
    n = node(1, store=store, log=log)
    elect(n)
    again = node(1, store=store, log=log, now=20_000)
    assert isinstance(again.state, ResignedState) and again.epoch == n.epoch


def test_file_quorum_state_store_replaces_atomically(tmp_path: pathlib.Path) -> None:
    store = FileQuorumStateStore(str(tmp_path / "quorum-state"))
    assert store.read() is None
    store.write(ElectionState(3, 2, None))
    store.write(ElectionState(4, None, 1))
    assert store.read() == ElectionState(4, None, 1)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["quorum-state"]


def test_epoch_cache_answers_end_offset_for_epoch_and_follows_truncation() -> None:
    log = MemoryRaftLog()
    for e in (1, 1, 3, 3, 3, 5):
        log.append_as_leader(e, None)
    assert log.end_offset_for_epoch(1) == (1, 2)
    assert log.end_offset_for_epoch(2) == (1, 2)  # no epoch 2: the largest below it
    assert log.end_offset_for_epoch(3) == (3, 5)
    assert log.end_offset_for_epoch(9) == (5, 6)
    assert log.end_offset_for_epoch(0) == (0, 0)
    log.truncate_to(3)
    assert log.epoch_cache == [(1, 0), (3, 2)] and log.end_offset_for_epoch(5) == (3, 3)
    with pytest.raises(ValueError):
        log.append_as_leader(2, None)


CORE = ("client.py", "quorum_state.py", "messages.py", "log.py")


@pytest.mark.parametrize("name", CORE)
def test_core_takes_no_time_sockets_or_global_randomness(name: str) -> None:
    """DESIGN.md "Time and randomness are injected": the core imports no clock, loop or socket, and uses
    ``random`` only as the type of the injected generator."""
    import reference_broker.raft as pkg
    tree = ast.parse((pathlib.Path(pkg.__file__).parent / name).read_text())
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert not imported & {"time", "asyncio", "socket", "selectors", "threading", "datetime"}
    uses = {n.attr for n in ast.walk(tree)
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "random"}
    assert uses <= {"Random"}


def test_a_diverging_epoch_below_the_high_watermark_is_refused() -> None:
    """Kafka's handleFetchResponse throws rather than truncate committed entries; so does the core."""
    from reference_broker.raft.client import RaftStateError
    log = MemoryRaftLog()
    for _ in range(3):
        log.append_as_leader(1, "x")
    f = node(2, log=log)
    f.handle(msg(1, 2, M.BeginQuorumEpochRequest(2, 1)), 0)
    out, _ = f.poll(0)
    fetch = [m for m in out if isinstance(m.body, M.FetchRequest)][0]
    out = f.handle(M.RaftMessage(1, 2, fetch.correlation_id, M.FetchResponse(M.NONE, 2, 1, high_watermark=3)), 1)
    assert f.high_watermark == 3
    fetch = [m for m in out if isinstance(m.body, M.FetchRequest)][0]
    with pytest.raises(RaftStateError):
        f.handle(M.RaftMessage(1, 2, fetch.correlation_id,
                               M.FetchResponse(M.NONE, 2, 1, high_watermark=3, diverging_epoch=(1, 1))), 2)
    assert log.end_offset() == 3
