"""DeleteTopics (key 20), v1–v6, on the controller (forwarded by brokers).

Behavior: a remove_topic record; every broker then drops its replicas and parked fetches on the topic complete
at once with UNKNOWN_TOPIC_OR_PARTITION (DelayedFetch Case C). Unknown names: UNKNOWN_TOPIC_OR_PARTITION; unknown
ids (v6): UNKNOWN_TOPIC_ID. ``delete.topic.enable=false`` answers TOPIC_DELETION_DISABLED. An error comes with
its text (Kafka: ApiError(error).message()), a deleted topic with error_message null.
"""
from __future__ import annotations

from kafka import errors as E
from kafka.protocol.admin import DeleteTopicsRequest, DeleteTopicsResponse

from ...registry import CONTROLLER
from ..context import ControllerContext

API_KEY = 20
VERSIONS = (1, 6)
APPLY_WAIT_S = 5.0

Result = DeleteTopicsResponse.DeletableTopicResult


@CONTROLLER.handles(DeleteTopicsRequest, DeleteTopicsResponse, VERSIONS)
async def handle(ctx: ControllerContext, req):
    c = ctx.node.controller
    if not c.active:
        return DeleteTopicsResponse(throttle_time_ms=0, responses=[
            Result(name=getattr(t, "name", t), topic_id=getattr(t, "topic_id", None),
                   error_code=E.NotControllerError.errno, error_message=None)
            for t in (req.topics if ctx.api_version >= 6 else req.topic_names)])
    if ctx.api_version >= 6:
        wanted = [(t.name, t.topic_id) for t in req.topics]
    else:
        wanted = [(n, None) for n in req.topic_names]
    results = []
    for name, topic_id in wanted:
        if name is None:
            t = c.image.topics_by_id.get(topic_id)
            if t is None:
                results.append(Result(name=None, topic_id=topic_id, error_code=E.UnknownTopicIdError.errno,
                                      error_message="unknown topic id"))
                continue
            name = t.name
        t = c.image.topics.get(name)
        tid = t.topic_id if t else topic_id
        if not c.config["delete.topic.enable"]:
            err = E.TopicDeletionDisabledError.errno
        else:
            err = c.delete_topic(name)
        # ControllerApis.deleteTopics answers new ApiError(error): the error's own text, null on success
        results.append(Result(name=name, topic_id=tid, error_code=err,
                              error_message=E.for_code(err).description if err else None))
    if not await c.wait_committed():
        results = [Result(name=r.name, topic_id=r.topic_id, error_code=E.NotControllerError.errno,
                          error_message=None) for r in results]
    await c.wait_applied(c.end_offset, APPLY_WAIT_S)
    return DeleteTopicsResponse(throttle_time_ms=0, responses=results)
