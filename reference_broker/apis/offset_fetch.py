"""OffsetFetch (key 9), v1–v9.

Behavior: committed offset, leader epoch (v5+) and metadata per partition; offset -1, epoch -1, metadata "" when
nothing is committed — also for unknown groups, topics and partitions, with no error (OffsetMetadataManager.
fetchOffsets: INVALID_OFFSET, NO_METADATA). Topics null (v2+) means every partition the group has offsets for.
v8 batches groups (KIP-709). Offsets are served as of the HW of the group's offsets partition (Kafka's
CoordinatorRuntime reads at the last committed offset): a commit not yet replicated is not seen. require_stable
(v7+) waits (offsets.commit.timeout.ms) until every write to that partition is committed, then reads the latest
state, as Kafka does by scheduling it as a write; a timeout answers NOT_COORDINATOR
(GroupCoordinatorService.handleOffsetFetchException). With require_stable, a partition with a transactional offset
commit waiting for its marker answers UNSTABLE_OFFSET_COMMIT, offset -1 (KIP-447,
OffsetMetadataManager.fetchOffsets: hasPendingTransactionalOffsets). v9 (KIP-848) names the member: for a consumer
group, a member id other than null (with epoch < 0: an admin) must be a member (UNKNOWN_MEMBER_ID) at exactly that
epoch (STALE_MEMBER_EPOCH) (ConsumerGroup.validateOffsetFetch); classic groups do not check it.
"""
from __future__ import annotations

from kafka import errors as E
from kafka.protocol.consumer import OffsetFetchRequest, OffsetFetchResponse

from ..context import BrokerContext
from ..group_coordinator import append_error
from ..registry import handles

API_KEY = 9
VERSIONS = (1, 9)


async def _stable_error(b, group_id: str, require_stable: bool) -> int:
    """0 when the group's offsets may be read now (after waiting for pending writes if asked), else the error."""
    if not require_stable:
        return 0
    err = await b.groups.wait_stable(group_id)
    if err in (E.UnknownTopicOrPartitionError.errno, E.NotEnoughReplicasError.errno, E.RequestTimedOutError.errno):
        return E.NotCoordinatorError.errno
    return append_error(err)


UNSTABLE_OFFSET_COMMIT = E.UnstableOffsetCommitError.errno


def _lookup(b, group_id: str, topics, stable: bool = False):
    """[(topic, [(partition, offset, epoch, metadata, error)])] for the requested (or all committed) partitions."""
    offsets = b.groups.fetch_offsets(group_id, stable)
    unknown = (0 if b.faults.on("offsets.uncommitted_is_zero") else -1, -1, "", 0)  # (offset, epoch, metadata, err)

    def entry(t: str, p: int, o):
        if stable and b.groups.has_pending_txn(group_id, (t, p)):
            return (p, -1, -1, "", UNSTABLE_OFFSET_COMMIT)
        return (p, o.offset, o.leader_epoch, o.metadata or "", 0) if o else (p, *unknown)

    if topics is None:
        if b.faults.on("offsets.fetch_all_empty"):
            return []
        out: dict[str, list] = {}
        for (t, p), o in sorted(offsets.items()):
            out.setdefault(t, []).append(entry(t, p, o))
        return list(out.items())
    result = []
    for t in topics:
        result.append((t.name, [entry(t.name, p, offsets.get((t.name, p))) for p in t.partition_indexes]))
    return result


@handles(OffsetFetchRequest, OffsetFetchResponse, VERSIONS)
async def handle(ctx: BrokerContext, req):
    b = ctx.broker
    if ctx.api_version >= 8:
        G = OffsetFetchResponse.OffsetFetchResponseGroup
        T = G.OffsetFetchResponseTopics
        P = T.OffsetFetchResponsePartitions
        groups = []
        for g in req.groups:
            err = await b.coordinator_error(g.group_id)
            if not err and ctx.api_version >= 9:
                err = b.groups.validate_offset_fetch(g.group_id, g.member_id, g.member_epoch)
            err = err or await _stable_error(b, g.group_id, req.require_stable)
            groups.append(G(group_id=g.group_id, error_code=err, topics=[] if err else [
                T(name=t, partitions=[P(partition_index=p, committed_offset=o, committed_leader_epoch=e, metadata=m,
                                        error_code=pe) for p, o, e, m, pe in parts])
                for t, parts in _lookup(b, g.group_id, g.topics, req.require_stable)]))
        return OffsetFetchResponse(throttle_time_ms=0, groups=groups)
    stable = ctx.api_version >= 7 and req.require_stable
    err = await b.coordinator_error(req.group_id) or await _stable_error(b, req.group_id, stable)
    if err:
        return OffsetFetchResponse(throttle_time_ms=0, topics=[], error_code=err)
    T = OffsetFetchResponse.OffsetFetchResponseTopic
    P = T.OffsetFetchResponsePartition
    topics = [T(name=t, partitions=[P(partition_index=p, committed_offset=o, committed_leader_epoch=e,
                                      metadata=m, error_code=pe) for p, o, e, m, pe in parts])
              for t, parts in _lookup(b, req.group_id, req.topics, stable)]
    return OffsetFetchResponse(throttle_time_ms=0, topics=topics, error_code=0)
