"""One chaos run: a target (a cluster started here — the reference cluster, Apache Kafka, Tansu, Kafka in Docker,
through fixtures/ — or a live `--bootstrap`), the queue workload, a nemesis schedule, a history file, a verdict
from the reports/ checkers and an HTML page. Faults use only the targets' contract (node verbs by id, the active
controller, proxies and topology), never a target's internals.

Safety rules, enforced here and not in the CLI so every caller gets them:
- a bootstrap off loopback needs `allow_remote`;
- on a live cluster, process faults need a control socket the operator names (`control`), network faults the
  proxies the operator names (`proxy_api` + `topology`): nothing else is touched;
- every fault is undone before `run()` returns or raises (the NemesisRunner's finally, then a last sweep), also
  on Ctrl-C and SIGTERM.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .client_stacks import check_client
from .clients import ClientConfig, kafka_python_settings, settings_summary
from .control_socket import ControlSocketTarget
from .nemesis import Context, NemesisRunner, ScheduleSpec, Step, generate
from .nemesis.schedule import NEMESES
from .queue import QueueSpec, QueueWorkload
from .scenarios import LEADER_NEMESES, behind_log_start_schedule, empty_epoch_schedule, lossy_schedule
from .txn import TxnSpec, TxnWorkload, await_stable
from .txn_clients import TXN_CLIENTS

EXIT_VALID, EXIT_ANOMALIES, EXIT_NOT_RUN = 0, 1, 2
WORKLOADS = ("queue", "txn", "metadata")
METADATA_CLIENTS = ("reference",)
PROCESS_FAULTS = {"kill", "pause", "restart", "stall-followers", "kill-leader", "kill-follower", "kill-controller",
                  "pause-controller", "kill-storage", "pause-storage"}
# faults that act on proxies (the cluster a run starts is then proxied)
NETWORK_FAULTS = {"partition", "latency", "kafka-error", "isolate-leader", "isolate-controller", "majority-minority",
                  "bridge", "refuse-produce", "isolate-storage"}
# The fixed schedules (chaos/scenarios.py) and the faults each uses.
FIXED_SCHEDULES = {"lossy": {"stall-followers", "kill-leader"},
                   "empty-epoch": {"refuse-produce", "kill-leader"},
                   "behind-log-start": {"kill-follower", "delete-consumed"}}
SCHEDULES = ("random", *FIXED_SCHEDULES)
LOOPBACK_HOSTS = {"127.0.0.1", "localhost", "::1"}
# A proxied target (fixtures/proxied.py: every client, follower and controller link is its own proxy) exposes
# `proxy_api` (Toxiproxy's HTTP API) and `topology` (chaos.faults.Topology); partition and latency nemeses act on
# those proxies.
NETWORK_HOOK = ("proxy_api", "topology")


class RunError(Exception):
    """The run could not start (bad options, unreachable cluster): exit 2 with this message."""


def parse_duration(text: str) -> float:
    """'60s', '2m', '500ms', '1.5' (seconds) -> seconds; positive and at most a day."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*", str(text))
    if not m:
        raise RunError(f"bad duration {text!r}: use e.g. 60s, 2m, 500ms")
    value = float(m.group(1)) * {"ms": 0.001, "s": 1, "m": 60, "h": 3600, None: 1}[m.group(2)]
    if not 0 < value <= 86400:
        raise RunError(f"duration {text!r} out of range (0, 24h]")
    return value


def check_bootstrap(bootstrap: str, allow_remote: bool) -> list[tuple[str, int]]:
    """HOST:PORT[,HOST:PORT...]; refuses a non-loopback host unless allowed."""
    out = []
    for part in bootstrap.split(","):
        host, sep, port = part.strip().rpartition(":")
        if not sep or not host or not port.isdigit():
            raise RunError(f"bad bootstrap {part!r}: expected HOST:PORT")
        host = host.strip("[]")
        if host not in LOOPBACK_HOSTS and not host.startswith("127.") and not allow_remote:
            raise RunError(f"bootstrap {host} is not loopback: faults against a remote cluster need --allow-remote")
        out.append((host, int(port)))
    return out


def reachable(addrs: list[tuple[str, int]], timeout: float = 3.0) -> bool:
    for host, port in addrs:
        try:
            with socket.create_connection((host, port), timeout=timeout):
                return True
        except OSError:
            continue
    return False


@dataclass
class RunOptions:
    """Everything a run needs; CLI flags map 1:1."""

    out: Path
    duration: float = 60.0
    rate: float = 200.0
    seed: int = 0
    nemeses: tuple[str, ...] = ("kill", "pause")
    schedule: str = "random"
    interval: float = 10.0
    fault_duration: float = 5.0
    workload: str = "queue"              # queue | txn (chaos/txn.py)
    client: str = "kafka-python"
    acks: int = -1
    commit: str = "sync"
    sub_via: str = "assign"
    group_protocol: str = "classic"      # classic | consumer (KIP-848; confluent and java stacks)
    producers: int = 2
    consumers: int = 2
    partitions: int = 2
    reset_prob: float = 0.0
    transformers: int = 1                # txn: consume-transform-produce processes
    abort_prob: float = 0.2              # txn: transactions aborted on purpose
    brokers: int = 3
    cluster_settings: dict[str, str] = field(default_factory=dict)
    target: str = "reference"            # the kind of cluster started here (fixtures.factory): reference, kafka, ...
    target_config: dict[str, str] = field(default_factory=dict)   # --target-config, passed through as given
    docker_image: str | None = None
    bootstrap: str | None = None
    allow_remote: bool = False
    client_extra: dict[str, str] = field(default_factory=dict)
    control: str | None = None
    control_cmds: list[str] = field(default_factory=list)   # ["kill=ssh {host} ...", ...] (chaos/remote.py)
    proxy_api: str | None = None
    topology: str | None = None
    run_id: str | None = None
    topic: str | None = None             # default: chaos-queue on a cluster started here, per run on a live one
    dry_run: bool = False
    progress: bool = True
    check_budget: float = 10.0
    html: bool = True
    parquet: bool = True


# Cluster settings for chaos runs: Kafka's defaults except short timeouts so a killed leader is replaced in
# seconds (a 60 s run sees several faults), still with session > 1.5 x lag so a stalled follower leaves the ISR
# by the lag rule before it is fenced.
CHAOS_CLUSTER_DEFAULTS = {
    "min.insync.replicas": "2",
    "unclean.leader.election.enable": "false",
    # Kafka's controller elects uncleanly at fencing time and then only every this often (default 5 min), so a
    # leader lost while its followers were fenced too stays leaderless for a whole run without it (Kafka's own
    # UncleanLeaderElectionTest sets 10 ms)
    "unclean.leader.election.interval.ms": "500",
    "replica.lag.time.max.ms": "2000",
    "broker.session.timeout.ms": "4000",
    "default.replication.factor": "3",
}


def cluster_settings(opts: RunOptions) -> dict[str, str]:
    return {**CHAOS_CLUSTER_DEFAULTS, **opts.cluster_settings}


# Targets started here that take broker settings by Kafka's names (`kafka.<setting>`) and a broker count; proxied
# ones route every link through a proxy, so partition and latency faults are proxy switches (docker: see proxiable).
TAKES_SETTINGS = {"reference", "kafka", "docker"}
PROXIED_TARGETS = {"reference", "kafka", "tansu"}
STARTABLE = ("reference", "kafka", "tansu", "docker")


def proxiable(opts: RunOptions) -> bool:
    """Whether the cluster a run starts can route every link through proxies: the docker target with the kafka
    flavour (--docker-image build:kafka) can, as the kafka target."""
    if opts.target == "docker":
        from fixtures.docker import takes_proxied

        return takes_proxied(opts.docker_image, opts.target_config)
    return opts.target in PROXIED_TARGETS


def target_config(opts: RunOptions, network: bool) -> dict[str, str]:
    """The --target-config of the cluster a run starts: brokers, the chaos settings (Kafka's names), proxied when
    network faults are wanted; the user's --target-config wins."""
    cfg: dict[str, str] = {}
    if opts.target in TAKES_SETTINGS:
        cfg["brokers"] = str(opts.brokers)
        cfg.update({f"kafka.{k}": v for k, v in cluster_settings(opts).items()})
    if network and proxiable(opts):
        cfg["proxied"] = "true"
    cfg.update(opts.target_config)
    return cfg


def workload_topic(opts: RunOptions) -> str:
    """The queue's topic: `chaos-queue` on a cluster this run starts; on a live cluster one of this run's own
    (`chaos-queue-<run id>`), since the values restart at 0 each run and a second run would read the first one's
    records as duplicates and skips. The txn workload's: `chaos-txn` (and `chaos-txn-out`), likewise."""
    if opts.topic:
        return opts.topic
    base = "chaos-txn" if opts.workload == "txn" else "chaos-queue"
    if opts.bootstrap is None:
        return base
    return f"{base}-{opts.run_id or '<run-id>'}"


def build_schedule(opts: RunOptions, brokers: list[int]) -> list[Step]:
    """The fault schedule for the options: pure (no target), so --dry-run prints exactly what will happen."""
    topic = workload_topic(opts)
    s = cluster_settings(opts)
    session_s = int(s.get("broker.session.timeout.ms", 9000)) / 1000
    if opts.schedule == "lossy":
        return lossy_schedule(topic, lag_s=int(s["replica.lag.time.max.ms"]) / 1000, session_s=session_s)
    if opts.schedule == "empty-epoch":
        return empty_epoch_schedule(topic, session_s=session_s)
    if opts.schedule == "behind-log-start":
        return behind_log_start_schedule(topic, session_s=session_s)
    if opts.schedule != "random":
        raise RunError(f"unknown schedule {opts.schedule!r}; known: {', '.join(SCHEDULES)}")
    if not opts.nemeses:
        return []
    known = {**NEMESES, **LEADER_NEMESES}
    unknown = [n for n in opts.nemeses if n not in known]
    if unknown:
        raise RunError(f"unknown nemesis {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    seeded = [n for n in opts.nemeses if n in NEMESES]
    # leave the last interval fault-free so the cluster settles before the final read
    total = max(0.0, opts.duration - min(opts.interval, opts.duration / 4))
    steps = generate(opts.seed, ScheduleSpec(interval=opts.interval, duration=opts.fault_duration, total=total,
                                             faults=tuple(seeded) or ("kill",), brokers=tuple(brokers),
                                             topics=(topic,)))
    return steps


@dataclass
class RunResult:
    exit_code: int
    run_id: str
    history: Path | None = None
    verdict: dict[str, Any] | None = None
    html: Path | None = None
    final: dict[str, Any] | None = None
    recovery: dict[str, Any] | None = None
    stable: dict[str, Any] | None = None   # txn: whether every partition's LSO caught up with its HW
    message: str = ""
    stats: dict[str, Any] = field(default_factory=dict)


def ensure_topic(bootstrap: str, topic: str, partitions: int, replication: int, extra: dict[str, str],
                 timeout_s: float = 30.0) -> None:
    """Create the workload topic (idempotent), retrying while a fresh cluster elects leaders."""
    from kafka.admin import KafkaAdminClient, NewTopic
    from kafka.errors import KafkaConfigurationError, TopicAlreadyExistsError

    try:
        settings = kafka_python_settings(extra)
    except ValueError as e:
        raise RunError(str(e)) from e
    deadline = time.monotonic() + timeout_s
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            admin = KafkaAdminClient(bootstrap_servers=bootstrap.split(","), request_timeout_ms=5000, **settings)
        except KafkaConfigurationError as e:  # a setting, not the cluster: retrying cannot help
            raise RunError(f"could not create topic {topic}: kafka-python refuses the client settings: {e}") from e
        except Exception as e:  # noqa: BLE001 - not up yet
            last = e
            time.sleep(0.5)
            continue
        try:
            admin.create_topics([NewTopic(topic, partitions, replication)])
        except TopicAlreadyExistsError:
            pass
        except Exception as e:  # noqa: BLE001
            last = e
            time.sleep(0.5)
            continue
        finally:
            admin.close()
        return
    raise RunError(f"could not create topic {topic}: {last}")


class Progress:
    """One status line on stderr every second: elapsed, ops/s, errors, current faults."""

    def __init__(self, workload: Any, runner: NemesisRunner, total: float, enabled: bool) -> None:
        self.w, self.r, self.total, self.enabled = workload, runner, total, enabled
        self.t0 = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="progress")
        self._last = (0.0, 0)

    def start(self) -> None:
        if self.enabled:
            self._thread.start()

    def line(self) -> str:
        s = self.w.stats
        now = time.monotonic() - self.t0
        done = s.ok + s.fail + s.info
        rate = (done - self._last[1]) / max(now - self._last[0], 1e-6)
        self._last = (now, done)
        faults = ", ".join(f"{f.kind}{_brief(f.params)}" for _, f in list(self.r.active)) or "none"
        what = "txns" if isinstance(self.w, TxnWorkload) else getattr(self.w, "unit", "sends")
        return (f"[{now:5.1f}/{self.total:.0f}s] {what} {done} ({rate:.0f}/s) ok {s.ok} fail {s.fail} "
                f"info {s.info} | faults: {faults}")

    def _loop(self) -> None:
        tty = sys.stderr.isatty()
        while not self._stop.wait(1.0):
            text = self.line()
            sys.stderr.write(("\r\x1b[K" + text) if tty else text + "\n")
            sys.stderr.flush()
        if tty:
            sys.stderr.write("\n")

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(2)


def _brief(params: dict[str, Any]) -> str:
    for k in ("broker", "brokers", "mode"):
        if k in params:
            return f"({params[k]})"
    return ""


def _say(opts: RunOptions, text: str) -> None:
    if opts.progress:
        print(text, file=sys.stderr, flush=True)


# the --control-cmd verbs each process fault needs (start, then undo)
VERBS_NEEDED = {"kill": ("kill", "restart"), "kill-leader": ("kill", "restart"), "kill-controller": ("kill", "restart"),
                "restart": ("restart",), "pause": ("pause", "resume"), "stall-followers": ("pause", "resume"),
                "pause-controller": ("pause", "resume")}


def command_target(opts: RunOptions, wanted: set[str]) -> Any:
    """The live cluster's fault verbs as command templates (chaos/remote.py), checked before anything runs."""
    from .remote import CommandTarget, ControlCommandError, parse_templates

    try:
        templates = parse_templates(opts.control_cmds)
        missing = sorted({v for f in wanted for v in VERBS_NEEDED.get(f, ())} - set(templates))
        if missing:
            raise ControlCommandError(f"nemesis {', '.join(sorted(wanted & set(VERBS_NEEDED)))} needs "
                                      f"--control-cmd for {', '.join(missing)}")
        assert opts.bootstrap is not None
        return CommandTarget.discover(opts.bootstrap, templates, allow_remote=opts.allow_remote)
    except ControlCommandError as e:
        raise RunError(str(e)) from None


def plan_only(opts: RunOptions) -> list[Step]:
    brokers = list(range(opts.brokers)) if opts.bootstrap is None else [0, 1, 2]  # reference ids: 0..N-1
    if opts.bootstrap is not None:
        check_bootstrap(opts.bootstrap, opts.allow_remote)
    return build_schedule(opts, brokers)


def _guard(opts: RunOptions, run_id: str, bootstrap: str, target: Any, proxies: Any) -> tuple[Any, Any, Any]:
    """A live cluster's faults journalled to a guardian process (chaos/guardian.py), which undoes what a crashed
    run left applied; a cluster the run started dies with it instead (the supervisor's watchdog)."""
    from .guardian import GuardedProxies, GuardedTarget, Guardian

    spec: dict[str, Any] = {"bootstrap": bootstrap, "control": opts.control, "proxy_api": opts.proxy_api}
    if target is not None and hasattr(target, "templates"):
        spec["templates"] = dict(target.templates)
        spec["brokers"] = {str(b): list(addr) for b, addr in target.brokers.items()}
    guardian = Guardian(spec, opts.out / f"{run_id}.guardian.log")
    return (GuardedTarget(target, guardian) if target is not None else None,
            GuardedProxies(proxies, guardian) if proxies is not None else None, guardian)


def run(opts: RunOptions, on_started: Callable[[dict[str, Any]], None] | None = None) -> RunResult:
    """Execute one run (see the module docstring); never leaves a fault or a process behind."""
    run_id = opts.run_id or f"chaos-{opts.seed}-{uuid.uuid4().hex[:6]}"
    opts.run_id = run_id                 # the live-cluster topic name and the schedule's leader faults use it
    if opts.workload not in WORKLOADS:
        raise RunError(f"unknown workload {opts.workload!r}; known: {', '.join(WORKLOADS)}")
    if opts.workload == "metadata" and opts.client not in METADATA_CLIENTS:
        raise RunError(f"--workload metadata speaks the protocol through the reference's client stack: --client "
                       f"reference (not {opts.client})")
    if opts.workload == "txn" and opts.client not in TXN_CLIENTS:
        raise RunError(f"--workload txn needs a client stack that does transactions: {', '.join(TXN_CLIENTS)} "
                       f"(not {opts.client})")
    if opts.group_protocol not in ("classic", "consumer"):
        raise RunError(f"--group-protocol is classic or consumer (not {opts.group_protocol!r})")
    if opts.group_protocol == "consumer" and opts.workload == "queue" and opts.sub_via != "subscribe":
        raise RunError("--group-protocol consumer needs group membership: --sub-via subscribe (assigned consumers "
                       "join no group)")
    check_client(opts.client, ClientConfig(bootstrap=opts.bootstrap or "127.0.0.1:9", acks=opts.acks,
                                           commit=opts.commit, extra=opts.client_extra,
                                           group_protocol=opts.group_protocol))  # before any cluster
    try:
        kafka_python_settings(opts.client_extra)  # the topic's admin speaks them too: refuse before any cluster
    except ValueError as e:
        raise RunError(str(e)) from e
    wanted = set(opts.nemeses) if opts.schedule == "random" else FIXED_SCHEDULES.get(opts.schedule, set())
    target: Any = None
    proxies = None
    topology = None
    if opts.bootstrap is not None:
        addrs = check_bootstrap(opts.bootstrap, opts.allow_remote)
        if wanted & PROCESS_FAULTS and not (opts.control or opts.control_cmds):
            raise RunError(f"nemesis {', '.join(sorted(wanted & PROCESS_FAULTS))} on a live cluster needs --control "
                           "SOCKET (the reference cluster's CONTROL socket) or --control-cmd VERB=COMMAND templates; "
                           "no process is touched otherwise")
        if not reachable(addrs):
            raise RunError(f"cluster unreachable: nothing answers at {opts.bootstrap}")
        bootstrap = opts.bootstrap
        if opts.control:
            target = ControlSocketTarget(opts.control, bootstrap)
        elif opts.control_cmds:
            target = command_target(opts, wanted)
        target_name = "live"
    else:
        if opts.target not in STARTABLE:
            raise RunError(f"--target {opts.target!r} cannot be started here: choose one of {', '.join(STARTABLE)}"
                           " or give --bootstrap for a live cluster")
        target_name = opts.target
    if wanted & NETWORK_FAULTS and not (opts.proxy_api and opts.topology) and opts.bootstrap is not None:
        raise RunError(f"nemesis {', '.join(sorted(wanted & NETWORK_FAULTS))} on a live cluster needs proxies: "
                       "--proxy-api HOST:PORT and --topology FILE")
    if wanted & NETWORK_FAULTS and opts.proxy_api and opts.topology:
        from .faults import Topology, ToxiproxyClient

        proxies = ToxiproxyClient(opts.proxy_api)
        links = json.loads(Path(opts.topology).read_text())
        topology = Topology({tuple(k.split("->")): v for k, v in links.items()})  # type: ignore[misc]

    opts.out.mkdir(parents=True, exist_ok=True)
    started_here = None
    if opts.bootstrap is None:
        from fixtures.factory import make_target
        from fixtures.target import TargetError, TargetUsageError

        # durable logs (the reference target's default; Kafka always): a SIGKILLed broker must come back with its
        # log (memory mode would be a wiped disk, and a sole-ISR leader restarting empty loses everything, which
        # is not what "kill" means)
        cfg = target_config(opts, bool(wanted & NETWORK_FAULTS) and proxies is None)
        try:
            started_here = make_target(opts.target, config=cfg, docker_image=opts.docker_image,
                                       work_dir=opts.out / f"{run_id}.cluster")
        except TargetUsageError as e:
            raise RunError(str(e)) from None
        _say(opts, f"starting {opts.target} ({', '.join(f'{k}={v}' for k, v in sorted(cfg.items()))}) ...")
        try:
            started_here.start()
        except TargetError as e:
            raise RunError(f"the {opts.target} cluster did not start: {e}") from None
        target = started_here
        bootstrap = started_here.bootstrap
        if proxies is None and getattr(target, "proxy_api", None):
            from .faults import ToxiproxyClient

            proxies, topology = ToxiproxyClient(target.proxy_api), target.topology
    guardian = None
    try:
        brokers = list(target.broker_ids) if target is not None else []
        steps = build_schedule(opts, brokers or [1])
        if steps and target is None and wanted & PROCESS_FAULTS:
            raise RunError("process faults need a target")
        if steps and started_here is None and (target is not None or proxies is not None):
            target, proxies, guardian = _guard(opts, run_id, bootstrap, target, proxies)
        return _execute(opts, run_id, target_name, bootstrap, target, proxies, topology, steps, on_started)
    finally:
        if guardian is not None:
            guardian.close()
        if started_here is not None:
            started_here.stop()
            for data in sorted((opts.out / f"{run_id}.cluster").glob("**/data")):   # keep the broker logs
                shutil.rmtree(data, ignore_errors=True)


def _live_brokers(bootstrap: str) -> int:
    """How many brokers a live cluster has (Metadata): a 1-broker cluster gets replication factor 1, not a refusal
    (before: every run on a live 1- or 2-broker cluster failed "could not create topic ... replication factor 3").
    3 when Metadata cannot be read plainly (TLS/SASL listeners): the broker then says what it refuses."""
    from fixtures.net import cluster_view, parse_bootstrap

    for host, port in parse_bootstrap(bootstrap):
        try:
            return len(cluster_view(host, port).brokers)
        except Exception:  # noqa: BLE001 - the next address, then the default
            continue
    return 3



def _drive(opts: RunOptions, runner: Any, steps: Any, workload: Any, progress: Any, t0: float) -> bool:
    """Run the workload and the fault schedule for ``opts.duration`` from ``t0``; every fault is undone and the
    workload stopped whatever happens. True if interrupted (Ctrl-C / SIGTERM land in the main thread, here)."""
    workload.start()
    progress.start()
    try:
        runner.run(steps)
        while (left := opts.duration - (time.monotonic() - t0)) > 0:
            time.sleep(min(left, 0.2))
    except KeyboardInterrupt:
        return True
    finally:
        runner.undo_all()
        progress.stop()
        workload.stop()
    return False

def _execute(opts: RunOptions, run_id: str, target_name: str, bootstrap: str, target: Any, proxies: Any,
             topology: Any, steps: list[Step], on_started: Callable[[dict[str, Any]], None] | None) -> RunResult:
    from history import Recorder

    replication = min(3, len(target.broker_ids) if target is not None else _live_brokers(bootstrap))
    if opts.workload == "metadata":
        return _execute_metadata(opts, run_id, target_name, bootstrap, target, proxies, topology, steps, on_started,
                                 replication)
    topic = workload_topic(opts)
    txn = opts.workload == "txn"
    for t in ([topic, f"{topic}-out"] if txn else [topic]):
        ensure_topic(bootstrap, t, opts.partitions, replication, opts.client_extra)
    # settings the target says this client stack needs to talk to it at all (a target defect's workaround, e.g.
    # Tansu and the Java client's KIP-1242 check): under the user's own, and recorded in the header
    needed = getattr(target, "client_settings", lambda _stack: {})(opts.client)
    cfg = ClientConfig(bootstrap=bootstrap, acks=opts.acks, commit=opts.commit,
                       extra={**needed, **opts.client_extra}, group=f"chaos-{run_id}",
                       group_protocol=opts.group_protocol)
    spec: Any
    if txn:
        spec = TxnSpec(topic=topic, partitions=opts.partitions, producers=opts.producers,
                       transformers=opts.transformers, consumers=opts.consumers, rate=opts.rate,
                       abort_prob=opts.abort_prob, replication=replication)
    else:
        spec = QueueSpec(topic=topic, partitions=opts.partitions, producers=opts.producers,
                         consumers=opts.consumers, rate=opts.rate, sub_via=opts.sub_via, reset_prob=opts.reset_prob,
                         replication=replication)
    nemesis_name = opts.schedule if opts.schedule != "random" else ",".join(opts.nemeses) or "none"
    txn_settings = ({"transformers": opts.transformers, "abort_prob": opts.abort_prob, "isolation": "read_committed",
                     "topics": spec.topics, "transaction.timeout.ms": cfg.txn_timeout_ms} if txn else {})
    settings = {"workload": opts.workload, **txn_settings, "client": opts.client, "seed": opts.seed,
                "sub_via": ["subscribe" if txn else opts.sub_via],
                "duration_s": opts.duration, "rate": opts.rate, "schedule": opts.schedule,
                "faults": [{"id": s.id, "at": s.at, "duration": s.duration, "kind": s.kind, "params": s.params}
                           for s in steps],
                "cluster": cluster_settings(opts) if target_name in TAKES_SETTINGS else {},
                "target_config": dict(opts.target_config),
                **settings_summary(cfg), "partitions": opts.partitions, "replication": replication,
                **({"target_client_settings": needed} if needed else {})}
    path = opts.out / f"{run_id}.jsonl"
    recorder = Recorder(run_id, target=target_name, nemesis=nemesis_name, settings=settings, sink=str(path))
    workload: Any = (TxnWorkload(spec, recorder, opts.client, cfg, seed=opts.seed) if txn
                     else QueueWorkload(spec, recorder, opts.client, cfg, seed=opts.seed))
    ctx = Context(target=target, client=proxies, topology=topology) if topology else Context(target=target)
    runner = NemesisRunner(ctx, recorder, nemeses={**NEMESES, **LEADER_NEMESES})
    progress = Progress(workload, runner, opts.duration, opts.progress)
    result = RunResult(EXIT_NOT_RUN, run_id, history=path)
    if on_started:
        on_started({"run_id": run_id, "bootstrap": bootstrap, "history": str(path)})
    t0 = time.monotonic()
    if _drive(opts, runner, steps, workload, progress, t0):
        recorder.close()
        result.message = "interrupted: every fault was undone; the partial history is kept"
        return result
    _say(opts, "waiting for every replica to be back in the ISR ...")
    result.recovery = await_isr_recovery(bootstrap, topic, recovery_timeout(opts, target_name))
    if txn:
        _say(opts, "waiting for every transaction to be decided (last stable offset = high watermark) ...")
        result.stable = await_stable(bootstrap, workload.keys(), cfg.txn_timeout_ms / 1000 + 20)
    _say(opts, "final read ...")
    deleted = any(st.kind == "delete-consumed" for st in steps)
    if txn:
        result.final = workload.final_read()
        raw = workload.raw_read()   # evidence, not checked: what each offset of the input topic really holds
        path.with_suffix(".uncommitted.json").write_text(json.dumps(raw))
    else:
        result.final = workload.final_read(log_starts(bootstrap, topic, opts.partitions) if deleted else None)
    recorder.close()
    s = workload.stats
    failed_faults = [op["value"] for op in recorder.history.ops
                     if op["f"] == "nemesis" and op["type"] == "info" and "error" in op["value"]]
    result.stats = {"ok": s.ok, "fail": s.fail, "info": s.info, "wall_s": round(time.monotonic() - t0, 1),
                    "faults": len(steps), "faults_failed": len(failed_faults), "errors": workload.errors}
    if txn:
        result.stats["txns"] = dict(workload.counts)
    if failed_faults:
        result.message = "some faults failed to apply: " + "; ".join(
            f"{v.get('fault')} #{v.get('id')} {v.get('phase')}: {v['error']}" for v in failed_faults[:3])
    if opts.parquet:
        try:
            recorder.write(str(path.with_suffix(".parquet")))
        except Exception as e:  # noqa: BLE001 - JSONL is the primary record
            result.stats["parquet_error"] = str(e)
    result.verdict, result.exit_code = check_history(path, opts.check_budget)
    if not result.recovery.get("recovered", False) and result.exit_code == EXIT_VALID:
        # Liveness: with every fault healed, Kafka's followers catch up and rejoin the ISR.
        result.exit_code = EXIT_ANOMALIES
        result.message = (f"replicas not back in the ISR {result.recovery.get('waited_s')} s after every fault was "
                          f"healed: {result.recovery.get('missing')} {result.message}")
    if not result.final.get("complete", False) and result.exit_code == EXIT_VALID:
        result.exit_code = EXIT_NOT_RUN
        result.message = f"final read incomplete: {result.final} {result.message}"
    elif not result.final.get("complete", False) and result.exit_code == EXIT_ANOMALIES \
            and only_unproven_without_final_read(result.verdict):
        result.exit_code = EXIT_NOT_RUN
        result.message = (f"final read incomplete: {result.final}; unseen writes are not proven without it "
                          f"{result.message}")
    if s.ok == 0 and result.exit_code == EXIT_VALID:
        # nothing was acknowledged, so nothing could be lost, duplicated or torn: VALID would be vacuous
        result.exit_code = EXIT_NOT_RUN
        result.message = (f"no {'transaction committed' if txn else 'send acknowledged'} in the whole run: no "
                          f"verdict on an empty history (errors: {workload.errors[:3]}) {result.message}")
    if opts.html:
        result.html = write_run_page(path, opts.out / f"{run_id}.html", result.verdict)
    (opts.out / f"{run_id}.result.json").write_text(json.dumps(
        {"run_id": run_id, "exit_code": result.exit_code, "final": result.final, "recovery": result.recovery,
         "stats": result.stats, "stable": result.stable,
         "verdict": result.verdict, "message": result.message}, indent=1, default=str))
    return result


def _execute_metadata(opts: RunOptions, run_id: str, target_name: str, bootstrap: str, target: Any, proxies: Any,
                      topology: Any, steps: list[Step], on_started: Callable[[dict[str, Any]], None] | None,
                      replication: int) -> RunResult:
    """The metadata workload's run (chaos/metadata.py): the same nemesis and verdict as the queue's; its liveness
    check is that every broker's view converges after the faults (the final read), not an ISR."""
    from history import Recorder

    from .kafka_meta import run_sync
    from .metadata import MetadataSpec, MetadataWorkload, served_apis, skipped_kinds

    try:
        served = run_sync(lambda: served_apis(bootstrap))
    except Exception as e:  # noqa: BLE001 - a cluster that answers no ApiVersions cannot run the workload
        raise RunError(f"ApiVersions of {bootstrap}: {type(e).__name__}: {e}") from None
    spec = MetadataSpec(workers=opts.producers + opts.consumers - 1 if opts.producers + opts.consumers > 1 else 1,
                        rate=opts.rate, replication=replication)
    nemesis_name = opts.schedule if opts.schedule != "random" else ",".join(opts.nemeses) or "none"
    path = opts.out / f"{run_id}.jsonl"
    header_settings: dict[str, Any] = {
        "workload": "metadata", "client": "reference", "seed": opts.seed, "duration_s": opts.duration,
        "rate": spec.rate, "workers": spec.workers, "replication": replication,
        "max_partitions": spec.max_partitions, "schedule": opts.schedule,
        "faults": [{"id": s.id, "at": s.at, "duration": s.duration, "kind": s.kind, "params": s.params}
                   for s in steps],
        "cluster": cluster_settings(opts) if target_name in TAKES_SETTINGS else {},
        "target_config": dict(opts.target_config)}
    if skipped_kinds(served):
        header_settings["skipped"] = skipped_kinds(served)
    recorder = Recorder(run_id, target=target_name, nemesis=nemesis_name, settings=header_settings, sink=str(path))
    workload = MetadataWorkload(spec, recorder, bootstrap, seed=opts.seed, served=served)
    ctx = Context(target=target, client=proxies, topology=topology) if topology else Context(target=target)
    runner = NemesisRunner(ctx, recorder, nemeses={**NEMESES, **LEADER_NEMESES})
    progress = Progress(workload, runner, opts.duration, opts.progress)
    result = RunResult(EXIT_NOT_RUN, run_id, history=path)
    if on_started:
        on_started({"run_id": run_id, "bootstrap": bootstrap, "history": str(path)})
    t0 = time.monotonic()
    if _drive(opts, runner, steps, workload, progress, t0):
        recorder.close()
        result.message = "interrupted: every fault was undone; the partial history is kept"
        return result
    _say(opts, "final read: every topic from every broker, until they agree ...")
    result.final = workload.final_read(spec.workers)
    recorder.close()
    s = workload.stats
    failed_faults = [op["value"] for op in recorder.history.ops
                     if op["f"] == "nemesis" and op["type"] == "info" and "error" in op["value"]]
    result.stats = {"ok": s.ok, "fail": s.fail, "info": s.info, "wall_s": round(time.monotonic() - t0, 1),
                    "faults": len(steps), "faults_failed": len(failed_faults), "errors": workload.errors,
                    "ops": dict(workload.counts), "topics": len(workload.names)}
    if workload.skipped:
        result.stats["skipped"] = workload.skipped
    if failed_faults:
        result.message = "some faults failed to apply: " + "; ".join(
            f"{v.get('fault')} #{v.get('id')} {v.get('phase')}: {v['error']}" for v in failed_faults[:3])
    result.verdict, result.exit_code = check_history(path, opts.check_budget)
    if not result.final.get("converged") and result.exit_code == EXIT_VALID:
        # Liveness: with every fault healed, every broker applies the committed metadata log.
        result.exit_code = EXIT_ANOMALIES
        result.message = f"brokers' metadata did not converge after the faults: {result.final} {result.message}"
    if s.ok == 0 and result.exit_code == EXIT_VALID:
        result.exit_code = EXIT_NOT_RUN
        result.message = f"no admin request acknowledged in the whole run (errors: {workload.errors[:3]})"
    if opts.html:
        result.html = write_run_page(path, opts.out / f"{run_id}.html", result.verdict)
    (opts.out / f"{run_id}.result.json").write_text(json.dumps(
        {"run_id": run_id, "exit_code": result.exit_code, "final": result.final, "stats": result.stats,
         "verdict": result.verdict, "message": result.message}, indent=1, default=str))
    return result


def log_starts(bootstrap: str, topic: str, partitions: int) -> dict[str, int] | None:
    """{"topic/p": log start offset} (ListOffsets EARLIEST), or None when the cluster cannot say now."""
    from reference_broker.client import Admin, TopicPartition

    from .kafka_meta import run_sync

    async def ask() -> dict[TopicPartition, int]:
        async with Admin(bootstrap, request_timeout=5.0) as admin:
            return await admin.earliest_offsets([TopicPartition(topic, p) for p in range(partitions)])

    try:
        return {f"{tp.topic}/{tp.partition}": off for tp, off in run_sync(ask).items()}
    except Exception:  # noqa: BLE001 - the final read then starts at 0 (and says what it reached)
        return None


def recovery_timeout(opts: RunOptions, target_name: str) -> float:
    """How long a healed cluster may take to bring every replica back: a restarted broker registers and is
    unfenced, a follower catches up and is added back (lag checks run every lag/2). Generous on purpose."""
    s = cluster_settings(opts) if target_name in TAKES_SETTINGS else {}
    lag_s = int(s.get("replica.lag.time.max.ms", 30_000)) / 1000
    session_s = int(s.get("broker.session.timeout.ms", 9_000)) / 1000
    return min(60.0, max(20.0, 2 * lag_s + session_s + 10.0))


def await_isr_recovery(bootstrap: str, topic: str, timeout_s: float) -> dict[str, Any]:
    """Wait (bounded) until every partition of ``topic`` has all its replicas in the ISR, as Metadata reports it.
    Returns {"recovered", "waited_s", "missing": {partition: replicas not in the ISR}} — a liveness verdict: a
    replica that never rejoins after every fault was healed is a defect even when no record was lost."""
    from .kafka_meta import _describe, run_sync

    t0 = time.monotonic()
    missing: dict[int, list[int]] | None = None
    error = None
    while True:
        try:
            meta = run_sync(lambda: _describe(bootstrap, 5.0))[0].get(topic)
            if meta is not None and meta.partitions:
                missing = {p: sorted(set(pm.replicas) - set(pm.isr)) for p, pm in sorted(meta.partitions.items())}
                missing = {p: m for p, m in missing.items() if m}
                if not missing:
                    break
        except Exception as e:  # noqa: BLE001 - leaders may still be moving: ask again until the deadline
            error = f"{type(e).__name__}: {e}"
        if time.monotonic() - t0 >= timeout_s:
            break
        time.sleep(0.5)
    out: dict[str, Any] = {"recovered": missing == {}, "waited_s": round(time.monotonic() - t0, 1),
                           "missing": missing}
    if missing is None and error:
        out["error"] = error
    return out


# "unseen" (acknowledged, above everything any poll read) rests on the final read reaching the end: when it could
# not (e.g. a Tansu cluster that answered no ListOffsets after a kill), the run is not a verdict on it.
UNPROVEN_WITHOUT_FINAL_READ = frozenset({"unseen"})


def only_unproven_without_final_read(verdict: dict[str, Any] | None) -> bool:
    """True when every anomaly that made the run invalid rests on a final read that did not complete."""
    if not verdict or "anomalies" not in verdict:
        return False
    bad = set(verdict["anomalies"].get("bad", []))
    illegal = any(v.get("verdict") == "illegal" for v in (verdict.get("linearizability") or {}).values()
                  if isinstance(v, dict))
    return bool(bad) and bad <= UNPROVEN_WITHOUT_FINAL_READ and not illegal


def check_history(path: Path, budget: float) -> tuple[dict[str, Any] | None, int]:
    """The reports/ checkers in a child process (one direction: chaos never imports reports)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parent.parent),
                                                        os.environ.get("PYTHONPATH", "")])}
    p = subprocess.run([sys.executable, "-m", "reports", "check", str(path), "--json", "--budget", str(budget)],
                       capture_output=True, text=True, env=env, timeout=600)
    try:
        verdict = json.loads(p.stdout)[0]
    except (ValueError, IndexError):
        verdict = {"error": (p.stderr or p.stdout)[-2000:]}
    return verdict, p.returncode if p.returncode in (0, 1, 2) else EXIT_NOT_RUN


def write_run_page(path: Path, out: Path, verdict: dict[str, Any] | None) -> Path | None:
    """The run's HTML page (reports.run_page), also in a child process."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parent.parent),
                                                        os.environ.get("PYTHONPATH", "")])}
    vpath = out.with_suffix(".verdict.json")
    vpath.write_text(json.dumps(verdict or {}, default=str))
    p = subprocess.run([sys.executable, "-m", "reports", "run-page", str(path), "--verdict", str(vpath),
                        "--out", str(out)], capture_output=True, text=True, env=env, timeout=300)
    vpath.unlink(missing_ok=True)
    return out if p.returncode == 0 and out.exists() else None
