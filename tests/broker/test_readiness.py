"""A user's first minute: start a broker, wait until its port accepts connections (what docker health checks, CI
scripts and Testcontainers do), then use it at once.

Apache Kafka processes no request before the broker has caught up with the metadata log and is unfenced
(``BrokerServer.startup``: ``socketServer.enableRequestProcessing`` comes after ``lifecycleManager.
setReadyToUnfence``; a fixed port is not even opened before, "so that systems which assume that the socket being
open indicates readiness are not confused", ``SocketServer.Acceptor``). So the first Metadata answer a client gets
names the broker itself and a controller — never 0 brokers and controller -1, which leaves librdkafka's
AdminClient waiting for a controller until it times out (``_TIMED_OUT "Failed while waiting for controller"``).
"""
from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from kafka.protocol.metadata import MetadataRequest

from reference_broker.client.protocol import Connection
from reference_broker.cluster import Cluster, free_port

STARTS = 4


async def _first_metadata(port: int, deadline: float) -> tuple[list[int], int]:
    """Connect as soon as the port accepts, then ask Metadata on that first connection: (broker ids, controller)."""
    while True:
        try:
            conn = await Connection.connect("127.0.0.1", port, timeout=1.0)
            break
        except OSError:
            if time.monotonic() > deadline:
                raise AssertionError(f"port {port} never accepted a connection") from None
            await asyncio.sleep(0.002)
    try:
        r = await conn.request(MetadataRequest[1](topics=[]), timeout=max(1.0, deadline - time.monotonic()))
        return sorted(b.node_id for b in r.body.brokers), r.body.controller_id
    finally:
        await conn.close()


def _create_topic(port: int, name: str) -> str | None:
    """confluent-kafka's AdminClient creating a topic right away: None on success, else the error text."""
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}", "socket.timeout.ms": 10_000})
    fut = admin.create_topics([NewTopic(name, 1, 1)], operation_timeout=10, request_timeout=10)[name]
    try:
        fut.result(timeout=20)
        return None
    except Exception as e:  # noqa: BLE001 - the error text is the evidence
        return str(e)


def test_serve_answers_no_request_before_it_is_ready(tmp_path: Path) -> None:
    """Fresh ``serve`` starts: the first Metadata after the port opens names the broker and a controller, and an
    AdminClient created right then creates a topic. (Before the fix, 3 of 4 starts listed 0 brokers.)"""
    seen = []
    for i in range(STARTS):
        port = free_port()
        proc = subprocess.Popen([sys.executable, "-m", "reference_broker", "serve", "--listen", f"127.0.0.1:{port}",
                                 "--memory", "--config", "num.partitions=1"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            brokers, controller = asyncio.run(_first_metadata(port, time.monotonic() + 30))
            err = _create_topic(port, f"ready-{i}")
            seen.append((brokers, controller, err))
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    bad = [s for s in seen if s[0] != [0] or s[1] != 0 or s[2] is not None]
    assert not bad, f"first Metadata (brokers, controller, topic creation error) per fresh start: {seen}"


def test_cluster_node_answers_no_request_before_it_is_ready(tmp_path: Path) -> None:
    """A restarted node of ``cluster``: the first Metadata on its port (polled while it starts) names live brokers,
    itself among them, and a controller."""
    with Cluster(brokers=2, work_dir=tmp_path, config={"num.partitions": "1"}) as c:
        port = int(c.bootstrap.split(",")[1].rsplit(":", 1)[1])
        seen = []
        for _ in range(STARTS - 1):
            c.kill(1)
            # the port is closed now; restart in the background and race it
            with socket.socket() as s:
                assert s.connect_ex(("127.0.0.1", port)) != 0, "a killed node's port still accepts"
            t = threading.Thread(target=c.restart, args=(1,))
            t.start()
            try:
                seen.append(asyncio.run(_first_metadata(port, time.monotonic() + 60)))
            finally:
                t.join(90)
        bad = [s for s in seen if 1 not in s[0] or s[1] < 0]
        assert not bad, f"first Metadata (brokers, controller) on node 1's port after each restart: {seen}"
