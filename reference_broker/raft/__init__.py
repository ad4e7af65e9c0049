"""The KRaft metadata quorum's Raft core (KIP-595, with KIP-996 pre-vote), as a pure state machine.

What exists (Kafka's names, so a reader can compare with org.apache.kafka.raft):
- ``client.KafkaRaftClient`` (alias ``RaftNode``): one replica. ``handle(message, now_ms)`` and ``poll(now_ms)`` return the messages to
  send (``poll`` also the next deadline); ``append`` (scheduleAppend) and ``resign`` for the leader. No sockets, no
  asyncio, no ``time``/``random`` inside: time comes in as arguments, election jitter from an injected seeded
  ``random.Random``. Settings are controller.quorum.* (``RaftConfig``); the voter set is static
  (controller.quorum.voters); non-voters are observers (they fetch and follow, never vote nor count for the HW).
- ``quorum_state``: ElectionState and the QuorumStateStore that persists it before a vote is answered
  (``FileQuorumStateStore``: atomic replace with fsync; ``MemoryQuorumStateStore``), the epoch states
  Unattached / Prospective (pre-vote) / Candidate / Leader / Follower / Resigned, and QuorumState, which writes each
  transition to the store before it takes effect (KafkaRaftClient decides when to transition).
- ``messages``: Vote (with pre-vote), BeginQuorumEpoch, EndQuorumEpoch, Fetch (fetch offset + last fetched epoch,
  answered with records, the high watermark, or a DivergingEpoch) and their responses, errors by Kafka's names.
- ``log``: the ReplicatedLog the core needs, epoch-tagged entries with a leader-epoch cache (``MemoryRaftLog``).
- A listener interface (``RaftListener``: handle_commit, handle_leader_change).
- ``simulation``: RaftEventSimulationTest's counterpart: many replicas in one process, virtual clock, seeded router
  (delay, drop, reorder, partitions), crash/restart from persisted state, invariants after every event.
- ``client.FAULTS``: test-only switches, each breaking one rule; tests/raft shows the simulation catches each.

Deliberate differences from Kafka's KafkaRaftClient (small, and each one a place to look when comparing):
- One record per log entry, no batches or compression; the accumulator only models controller.quorum.append.linger.ms.
- A lost or timed-out election backs off (binary exponential, as Kafka's older candidates did), then goes
  prospective again.
- A voter that restarts having voted for itself resumes Unattached with that vote kept (Kafka resumes Candidate).
- A voter receiving EndQuorumEpoch becomes Unattached with the rank backoff (Kafka overrides its follower fetch
  timeout); either way it stops vouching for the resigned leader, so KIP-996 pre-votes can succeed.
- An unattached observer discovers the leader by fetching from the voters in turn (Kafka: the bootstrap servers).
- The pre-vote carries the epoch the prospective would stand in (its epoch + 1), as KIP-996 describes.

Wired in (issue 25): ``controller/quorum.py`` drives one client per controller process over real sockets (Vote,
BeginQuorumEpoch, EndQuorumEpoch and the Raft Fetch in Kafka's wire format on the controller listener), on a
durable log (KafkaMetadataLog over FileLog, fsync on ``flush``) and FileQuorumStateStore; the QuorumController is
the listener and the active controller only as leader; DescribeQuorum reports the leader's view. Still left
(reference_broker/GAPS.md): brokers as Raft observers (they fetch committed records from the active controller),
KIP-630 snapshots (FetchSnapshot, log start offset past zero), KIP-853 dynamic voters (AddRaftVoter/RemoveRaftVoter,
voter directory ids, VotersRecord), Kafka's request manager (per-destination backoff) and batching of appends.
"""
from .client import (
    FAULTS,
    KafkaRaftClient,
    NotLeaderError,
    RaftConfig,
    RaftListener,
    RaftNode,
    RecordingListener,
)
from .log import LogEntry, MemoryRaftLog, RaftLog
from .quorum_state import (
    ElectionState,
    FileQuorumStateStore,
    MemoryQuorumStateStore,
    QuorumState,
    QuorumStateStore,
)

__all__ = ["FAULTS", "ElectionState", "FileQuorumStateStore", "KafkaRaftClient", "LogEntry", "MemoryQuorumStateStore",
           "MemoryRaftLog", "NotLeaderError", "QuorumState", "QuorumStateStore", "RaftConfig", "RaftListener",
           "RaftLog", "RaftNode", "RecordingListener"]
