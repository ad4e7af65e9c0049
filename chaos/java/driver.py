"""The Python end of the Java driver: one JVM per workload client, started and stopped by PID, and the
`QueueClient` that relays the workload's calls to it (protocol and outcome rules: chaos/java/__init__.py).
"""

from __future__ import annotations

import atexit
import collections
import json
import os
import queue
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from chaos.clients import ClientConfig, Definite, Indefinite, QueueClient, Record, definite_send_errors
from chaos.txn_clients import TxnClient

# The project's process supervisor's dead man's switch: if this Python process is SIGKILLed while a JVM is stopped
# (SIGSTOP: it cannot read the EOF on its stdin that otherwise ends it), the watchdog SIGCONTs and SIGKILLs it.
from reference_broker.supervisor import _WATCH

from .build import MAIN_CLASS, BuildError, DriverBuild, ensure_driver

# Small heap, C1 only, serial GC: a workload client does little work, and several JVMs share 2 cores with the
# brokers. No perf-data files in /tmp. The client's WARN logs go to stderr (kept as a tail for error messages).
JVM_OPTS = ("-Xms16m", "-Xmx192m", "-Xss512k", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-XX:-UsePerfData",
            "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-Dorg.slf4j.simpleLogger.logFile=System.err",
            "-Dorg.slf4j.simpleLogger.showDateTime=true")
START_TIMEOUT_S = 60.0
GUARD_S = 15.0  # beyond the Java client's own bound for a call: the JVM is hung, kill it
STDERR_TAIL = 40

_LIVE: set[JavaDriver] = set()  # started and not yet reaped
_LIVE_LOCK = threading.Lock()
_EOF = object()


class DriverDied(RuntimeError):
    """The JVM exited (killed, crashed) with a command pending or before it."""


class DriverTimeout(RuntimeError):
    """No completion within the guard; the JVM has been killed."""


def producer_props(cfg: ClientConfig) -> dict[str, str]:
    """KafkaProducer settings: the same semantics as the other stacks (acks as given, no idempotence, no retries,
    so an error answer is about the one attempt), the Java client's own timeouts sized like theirs."""
    t = int(cfg.timeout_s * 1000)
    return {"bootstrap.servers": cfg.bootstrap, "acks": "all" if cfg.acks == -1 else str(cfg.acks),
            "enable.idempotence": "false", "retries": "0", "linger.ms": "0", "request.timeout.ms": str(t),
            "delivery.timeout.ms": str(t), "max.block.ms": str(t), **cfg.extra}


def txn_producer_props(cfg: ClientConfig) -> dict[str, str]:
    """A transactional KafkaProducer: idempotent (retries as the Java client's default), acks=all, the
    transactional.id and transaction.timeout.ms of the txn workload; blocking calls bounded by max.block.ms."""
    return {**producer_props(cfg), "acks": "all", "enable.idempotence": "true", "retries": "2147483647",
            "transactional.id": cfg.transactional_id or "", "transaction.timeout.ms": str(cfg.txn_timeout_ms)}


def consumer_props(cfg: ClientConfig) -> dict[str, str]:
    """KafkaConsumer settings: the other stacks' group timing; blocking calls (commitSync, position) bounded by
    default.api.timeout.ms = 10 s instead of 60 s so a consumer keeps polling through faults. With
    ``group.protocol=consumer`` (KIP-848) the session and heartbeat timing are the broker's: the Java client refuses
    session.timeout.ms / heartbeat.interval.ms then (ConsumerConfig), so they are not set."""
    timing = {"group.protocol": "consumer"} if cfg.consumer_protocol else {
        "session.timeout.ms": "6000", "heartbeat.interval.ms": "1000"}
    return {"bootstrap.servers": cfg.bootstrap, "group.id": cfg.group,
            "enable.auto.commit": str(cfg.commit == "auto").lower(), "auto.commit.interval.ms": "1000",
            "auto.offset.reset": "earliest", **timing,
            "request.timeout.ms": str(max(int(cfg.timeout_s * 1000), 6000)), "default.api.timeout.ms": "10000",
            **({"isolation.level": cfg.isolation} if cfg.isolation else {}), **cfg.extra}


_BUILD: list[DriverBuild] = []  # this process's build: one per run, even if the sources change meanwhile
_BUILD_LOCK = threading.Lock()


def driver_build() -> DriverBuild:
    """The driver build this process uses (built on first use; see build.ensure_driver)."""
    with _BUILD_LOCK:
        if not _BUILD:
            _BUILD.append(ensure_driver())
        return _BUILD[0]


def java_binary() -> str:
    home = os.environ.get("JAVA_HOME")
    if home and os.access(os.path.join(home, "bin", "java"), os.X_OK):
        return os.path.join(home, "bin", "java")
    found = shutil.which("java")
    if not found:
        raise BuildError("`java` (17+) is not on PATH and JAVA_HOME is not set")
    return found


class JavaDriver:
    """One `kct.chaos.Driver` JVM: stdin/stdout pipes for the protocol, stderr drained into a tail. Stopped by
    its PID (SIGKILL after a grace period); an atexit hook stops any a crashed caller left."""

    def __init__(self, build: DriverBuild, label: str = "client") -> None:
        self.build = build
        self.label = label
        self._proc: subprocess.Popen[bytes] | None = None
        self._replies: queue.Queue[Any] = queue.Queue()
        self._stderr: collections.deque[str] = collections.deque(maxlen=STDERR_TAIL)
        self._next_id = 0
        self._write_lock = threading.Lock()
        self.pending: str | None = None  # the op awaiting its completion (read by tests that kill mid-call)
        self.hello: dict[str, Any] = {}

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self, timeout: float = START_TIMEOUT_S) -> JavaDriver:
        extra = os.environ.get("KCT_JAVA_OPTS", "").split()  # e.g. -Djavax.net.debug=ssl, a bigger heap
        argv = [java_binary(), *JVM_OPTS, *extra, "-cp", self.build.classpath, MAIN_CLASS]
        try:
            self._proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, start_new_session=True)
        except OSError as e:
            raise DriverDied(f"cannot start the Java driver: {argv[0]}: {e.strerror or e}") from e
        with _LIVE_LOCK:
            _LIVE.add(self)
        _WATCH.watch(self._proc.pid)
        threading.Thread(target=self._read_stdout, args=(self._proc,), daemon=True, name="java-stdout").start()
        threading.Thread(target=self._read_stderr, args=(self._proc,), daemon=True, name="java-stderr").start()
        hello = self._take(timeout, "start")
        if not hello.get("ready"):
            self.kill()
            raise DriverDied(f"the Java driver did not start properly: {hello}{self.stderr_tail()}")
        self.hello = hello
        return self

    def _read_stdout(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        try:
            for raw in iter(proc.stdout.readline, b""):
                try:
                    self._replies.put(json.loads(raw))
                except ValueError:
                    self._stderr.append(f"(stdout, not JSON) {raw[:300]!r}")
        except (OSError, ValueError):
            pass
        self._replies.put(_EOF)

    def _read_stderr(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stderr is not None
        try:
            for raw in iter(proc.stderr.readline, b""):
                self._stderr.append(raw.decode("utf-8", "replace").rstrip()[:500])
        except (OSError, ValueError):
            pass

    def stderr_tail(self, n: int = 6) -> str:
        lines = list(self._stderr)[-n:]
        return ("\n  JVM stderr: " + "\n  ".join(lines)) if lines else ""

    def _how(self) -> str:
        assert self._proc is not None
        try:
            code = self._proc.wait(5)
        except subprocess.TimeoutExpired:
            return "closed its stdout but is still running"
        return f"killed by {signal.Signals(-code).name}" if code < 0 else f"exited with code {code}"

    def _take(self, timeout: float, op: str) -> dict[str, Any]:
        try:
            r = self._replies.get(timeout=timeout)
        except queue.Empty:
            self.kill()
            raise DriverTimeout(f"the Java client gave no completion for {op} within {timeout:.0f}s (its own "
                                f"timeouts are shorter); JVM pid {self.pid} killed{self.stderr_tail()}") from None
        if r is _EOF:
            raise DriverDied(f"the Java client's JVM (pid {self.pid}) {self._how()} during {op}"
                             f"{self.stderr_tail()}")
        return r

    def call(self, op: str, timeout: float, **fields: Any) -> dict[str, Any]:
        """Send one command and wait for its completion (bounded by `timeout`, after which the JVM is killed)."""
        if self._proc is None or self._proc.stdin is None:
            raise DriverDied("the Java driver is not started")
        self._next_id += 1
        cid = self._next_id
        line = json.dumps({"id": cid, "op": op, **fields}) + "\n"
        self.pending = op
        try:
            with self._write_lock:
                try:
                    self._proc.stdin.write(line.encode())
                    self._proc.stdin.flush()
                except (BrokenPipeError, OSError, ValueError):
                    pass  # the JVM is gone; the reader reports EOF with how it ended
            deadline = time.monotonic() + timeout
            while True:
                r = self._take(max(0.0, deadline - time.monotonic()), op)
                if r.get("id") == cid:
                    return r
                self._stderr.append(f"(stray completion) {str(r)[:300]}")
        finally:
            self.pending = None

    def kill(self) -> None:
        """SIGKILL by PID and reap: the crash fault (also what a hung JVM gets)."""
        if self._proc is not None and self._proc.poll() is None:
            try:
                os.kill(self._proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self._reap()

    def stop(self, grace: float = 5.0) -> None:
        """Close stdin (the driver halts on EOF), wait `grace`, then SIGKILL by PID; always reaps. Idempotent."""
        if self._proc is None:
            return
        if self._proc.poll() is None:
            try:
                os.kill(self._proc.pid, signal.SIGCONT)  # a stopped JVM would not read its EOF
            except ProcessLookupError:
                pass
            with self._write_lock:
                try:
                    assert self._proc.stdin is not None
                    self._proc.stdin.close()
                except (OSError, ValueError):
                    pass
            try:
                self._proc.wait(grace)
            except subprocess.TimeoutExpired:
                pass
        self.kill()

    def _reap(self) -> None:
        if self._proc is None:
            return
        try:
            self._proc.wait(10)
        except subprocess.TimeoutExpired:
            return
        _WATCH.forget(self._proc.pid)
        for pipe in (self._proc.stdin, self._proc.stdout, self._proc.stderr):
            try:
                if pipe is not None and pipe is not self._proc.stdout:
                    pipe.close()
            except (OSError, ValueError):
                pass
        with _LIVE_LOCK:
            _LIVE.discard(self)


def live_drivers() -> list[JavaDriver]:
    """Every JVM started here and not yet reaped (tests kill some mid-run)."""
    with _LIVE_LOCK:
        return [d for d in _LIVE if d.alive()]


@atexit.register
def _stop_all() -> None:
    with _LIVE_LOCK:
        left = list(_LIVE)
    for d in left:
        d.kill()


class JavaClient(QueueClient):
    """A workload client backed by one JVM at a time; a dead JVM is replaced on the next call (module docstring)."""

    def __init__(self, cfg: ClientConfig, build: DriverBuild | None = None) -> None:
        self.cfg = cfg
        self._build = build
        self._driver: JavaDriver | None = None
        self._role = "client"
        self._sub: tuple[str, list[str]] | None = None  # ("assign", ["t/0", ...]) | ("subscribe", [topics])
        self._positions: dict[str, int] = {}  # assigned: where the application has read up to (or sought)
        self.jvms = 0  # JVMs started by this client (a restart is a JVM that died and was replaced)
        self.pp, self.cp = producer_props(cfg), consumer_props(cfg)
        self.send_guard = (int(self.pp["max.block.ms"]) + int(self.pp["delivery.timeout.ms"])) / 1000 + GUARD_S
        self.api_guard = int(self.cp["default.api.timeout.ms"]) / 1000 + GUARD_S

    @property
    def driver(self) -> JavaDriver | None:
        return self._driver

    def _ensure(self) -> JavaDriver:
        d = self._driver
        if d is not None and d.alive():
            return d
        if d is not None:
            d.stop()
        try:
            build = self._build = self._build or driver_build()
        except BuildError as e:
            raise DriverDied(str(e)) from e
        d = JavaDriver(build, label=self._role).start()
        self._driver = d
        self.jvms += 1
        try:
            self._ok(d.call("config", 30, producer=self.pp, consumer=self.cp), "config")
            if self._sub is not None:  # a replacement JVM: the same assignment, the application's positions
                self._ok(d.call(self._sub[0], 30, **{"partitions" if self._sub[0] == "assign" else "topics":
                                                     self._sub[1]}), self._sub[0])
                for key, off in self._positions.items():
                    t, p = _split(key)
                    self._ok(d.call("seek", 30, topic=t, partition=p, offset=off), "seek")
        except Exception:
            self._drop()
            raise
        return d

    def _drop(self) -> None:
        if self._driver is not None:
            self._driver.kill()
            self._driver = None

    def _call(self, op: str, timeout: float, **fields: Any) -> dict[str, Any]:
        d = self._ensure()
        try:
            return d.call(op, timeout, **fields)
        except (DriverDied, DriverTimeout):
            self._drop()
            raise

    @staticmethod
    def _ok(r: Mapping[str, Any], what: str) -> Mapping[str, Any]:
        if not r.get("ok"):
            raise RuntimeError(f"Java client {what}: {r.get('error') or ''} {r.get('exception', '')}".strip())
        return r

    # -- producer
    def send(self, topic: str, partition: int, key: str, value: int) -> int:
        self._role = "producer" if self._role == "client" else self._role
        try:
            self._ensure()
        except Exception as e:  # noqa: BLE001 - no JVM to send with: the send was never issued
            raise Definite(f"not sent: {e}") from e
        try:
            r = self._call("send", self.send_guard, topic=topic, partition=partition, key=key, value=str(value))
        except (DriverDied, DriverTimeout) as e:
            raise Indefinite(f"{type(e).__name__}: {e}") from e
        if r.get("ok"):
            return int(r["offset"])
        err = f"{r.get('error') or ''}: {r.get('exception', '')}"
        if r.get("appended") is False:
            raise Definite(f"not sent (KafkaProducer.send failed before the accumulator) {err}")
        if r.get("error") in definite_send_errors(self.cfg.acks):
            raise Definite(err)
        raise Indefinite(err)

    # -- consumer
    def _local(self, op: str, **fields: Any) -> None:
        """assign/subscribe/seek change only the consumer's own state (no request): the state is kept here first,
        so if the JVM dies during the call, a replacement that replays it has done the call."""
        try:
            self._ok(self._call(op, 30, **fields), op)
        except (DriverDied, DriverTimeout):
            self._ensure()

    def assign(self, partitions: Sequence[tuple[str, int]]) -> None:
        self._role = "consumer"
        keys = [f"{t}/{p}" for t, p in partitions]
        self._sub = ("assign", keys)
        self._positions = {k: o for k, o in self._positions.items() if k in keys}
        self._local("assign", partitions=keys)

    def subscribe(self, topics: Sequence[str]) -> None:
        self._role = "consumer"
        self._sub, self._positions = ("subscribe", list(topics)), {}
        self._local("subscribe", topics=list(topics))

    def seek(self, topic: str, partition: int, offset: int) -> None:
        if self._sub is not None and self._sub[0] == "assign":
            self._positions[f"{topic}/{partition}"] = offset
        self._local("seek", topic=topic, partition=partition, offset=offset)

    def poll(self, timeout_s: float) -> tuple[list[Record], dict[str, int] | None]:
        if self._sub is None:
            return [], None
        assigned = self._sub[0] == "assign"
        r = self._ok(self._call("poll", timeout_s + self.api_guard + 45, timeout_ms=int(timeout_s * 1000),
                                positions=assigned), "poll")
        out: list[Record] = [(t, p, o, k, _value(v)) for t, p, o, k, v in r["records"]]
        if assigned:
            for t, p, o, _k, _v in out:
                self._positions[f"{t}/{p}"] = o + 1
        return out, dict(r.get("positions") or {}) or None

    def commit(self, offsets: Mapping[str, int]) -> bool:
        asynchronous = self.cfg.commit == "async"
        self._ok(self._call("commit", self.api_guard, offsets=dict(offsets), **{"async": asynchronous}), "commit")
        return not asynchronous

    def end_offsets(self, partitions: Sequence[tuple[str, int]]) -> dict[str, int]:
        t = self.cfg.timeout_s * 2
        r = self._ok(self._call("end_offsets", t + GUARD_S, partitions=[f"{tp}/{p}" for tp, p in partitions],
                                timeout_ms=int(t * 1000)), "end_offsets")
        return {k: int(v) for k, v in r["offsets"].items()}

    def close(self) -> None:
        d, self._driver = self._driver, None
        if d is None:
            return
        if d.alive():
            try:
                d.call("close", 15)
            except (DriverDied, DriverTimeout):
                pass
        d.stop()


    def positions(self) -> dict[str, int]:
        r = self._ok(self._call("positions", self.api_guard), "positions")
        return {k: int(v) for k, v in r["positions"].items()}


class JavaTxnClient(JavaClient, TxnClient):
    """The txn workload's client (chaos/txn_clients.TxnClient) on the Java client: KafkaProducer's transactions and
    KafkaConsumer.groupMetadata() for sendOffsetsToTransaction. A reset replaces the JVM (its consumer gets its
    subscription back and, in a group, the committed offsets)."""

    def __init__(self, cfg: ClientConfig, build: DriverBuild | None = None) -> None:
        super().__init__(cfg, build)
        self.pp = txn_producer_props(cfg)
        self.send_guard = (int(self.pp["max.block.ms"]) + int(self.pp["delivery.timeout.ms"])) / 1000 + GUARD_S
        self._inited = False

    def _txn(self, op: str, **fields: Any) -> Mapping[str, Any]:
        return self._ok(self._call(op, self.send_guard, **fields), op)

    def init(self) -> None:
        if not self._inited or self._driver is None or not self._driver.alive():
            self._txn("txn_init")
            self._inited = True

    def begin(self) -> None:
        self._txn("txn_begin")

    def txn_send(self, topic: str, partition: int, key: str, value: int) -> int | None:
        return int(self._txn("send", topic=topic, partition=partition, key=key, value=str(value))["offset"])

    def send_offsets(self, offsets: Mapping[str, int]) -> None:
        self._txn("txn_send_offsets", offsets=dict(offsets))

    def commit(self) -> bool:  # type: ignore[override]
        self._txn("txn_commit")
        return True

    def abort(self) -> None:
        self._txn("txn_abort")

    def rewind(self) -> None:
        self._ok(self._call("rewind", self.api_guard), "rewind")

    def reset(self) -> None:
        self._inited = False
        self.close()


def _split(key: str) -> tuple[str, int]:
    topic, _, part = key.rpartition("/")
    return topic, int(part)


def _value(text: str | None) -> Any:
    """The other stacks' value decoding (clients._value): digits are the workload's integers."""
    if text is None:
        return None
    return int(text) if text.lstrip("-").isdigit() else text


def check_settings(cfg: ClientConfig) -> dict[str, Any]:
    """Build the driver if needed and let the Java client construct a producer and a consumer with these settings;
    raises ValueError naming what it refused (a bad setting, an unreadable keystore, no driver build)."""
    try:
        build = driver_build()
    except BuildError as e:
        raise ValueError(f"--client java: {e}") from e
    d = JavaDriver(build, label="check")
    try:
        d.start()
        for op, fields in (("config", {"producer": producer_props(cfg), "consumer": consumer_props(cfg)}),
                           ("check", {})):
            r = d.call(op, 60, **fields)
            if not r.get("ok"):
                raise ValueError(f"--client java: the Java client refuses these settings: {r.get('exception')}")
        return d.hello
    except (DriverDied, DriverTimeout) as e:
        raise ValueError(f"--client java: {e}") from e
    finally:
        d.stop()
