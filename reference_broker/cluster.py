"""A reference cluster on loopback: one controller process (or a Raft quorum of them) and N broker processes, and
their control interface.

Python API (what fixtures use)::

    with Cluster(brokers=3, data_dir=Path("d"), config={"min.insync.replicas": "2"}) as c:
        c.bootstrap            # "127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3"
        c.kill(1); c.restart(1); c.pause(2); c.resume(2)     # by node id, signals sent by PID

With ``controllers=3`` (CLI ``--controllers 3``) the controllers are dedicated voters of a KIP-595 quorum, node ids
1000.. as the kafka target's (fixtures/kafka.py), each its own process, named by id to kill/pause/restart; every
node gets controller.quorum.voters. ``controllers=1`` is the single controller (node -1) as before.

CLI: ``python -m reference_broker cluster --brokers 3 --data-dir DIR`` prints ``READY <bootstrap>`` and
``CONTROL <socket>``, then serves until SIGINT/SIGTERM; ``python -m reference_broker ctl --control SOCKET kill 1``
(kill, pause, resume, restart, status). Every node keeps its port across restarts (the address clients and
followers know), and its data dir when durable. Every process started here is stopped here, by PID.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import sys
import tempfile
import threading
from pathlib import Path

from .ports import free_port
from .supervisor import ManagedProcess, ProcessError

HOST = "127.0.0.1"
CONTROLLER_ID_BASE = 1000    # the quorum's voters, as fixtures/kafka.py numbers dedicated controllers


class ClusterError(ProcessError):
    """A node could not be started or controlled; the message says which and why (with its log tail)."""


class NodeProcess(ManagedProcess):
    """One node (controller or broker): a supervised process (reference_broker.supervisor) that prints
    ``READY host:port`` once it serves."""

    error = ClusterError

    def __init__(self, name: str, argv: list[str], port: int, log_path: Path, env: dict[str, str]) -> None:
        super().__init__(argv, log_path, env=env, ready_pattern=r"^READY ", what=name)
        self.name = name
        self.port = port

    @property
    def pid(self) -> int | None:
        """The PID while the node runs (None once it exited: what `status` reports)."""
        return super().pid if self.alive() else None

    def start(self, ready_timeout: float = 60.0) -> None:  # type: ignore[override]
        super().start(ready_timeout)

    def resume(self) -> None:
        """SIGCONT if the node still runs (resuming a killed node is a no-op, as the fault verbs expect)."""
        if self.alive():
            super().resume()


class Cluster:
    """A controller and ``brokers`` brokers (node ids 0..N-1), each its own process on a fixed loopback port."""

    def __init__(self, brokers: int = 3, *, data_dir: Path | None = None, work_dir: Path | None = None,
                 config: dict[str, str] | None = None, faults: list[str] | None = None, seed: int | None = None,
                 base_port: int = 0, host: str = HOST, ready_timeout: float = 60.0,
                 advertised: dict[int, str] | None = None, links: dict[int, str] | None = None,
                 controller_address: dict[int, str] | None = None, controllers: int = 1) -> None:
        if brokers < 1:
            raise ClusterError("a cluster needs at least one broker")
        if controllers < 1:
            raise ClusterError("a cluster needs at least one controller")
        self.n = brokers
        self.data_dir = data_dir
        self._tmp = work_dir is None
        self.work_dir = Path(work_dir) if work_dir else Path(tempfile.mkdtemp(prefix="kct-cluster-"))
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.config = dict(config or {})
        # As Kafka's multi-node sample configs do: the offsets topic is created with this factor or not at all, so
        # Kafka's default (3) would leave a 1- or 2-broker cluster without group coordinators.
        self.config.setdefault("offsets.topic.replication.factor", str(min(3, brokers)))
        self.config.setdefault("transaction.state.log.replication.factor", str(min(3, brokers)))
        self.config.setdefault("transaction.state.log.min.isr", str(min(2, brokers)))
        self.faults = list(faults or [])
        self.seed = seed
        self.host = host
        self.ready_timeout = ready_timeout
        self.advertised = dict(advertised or {})         # node id -> HOST:PORT clients are told (a proxy)
        self.links = dict(links or {})                   # node id -> "ID=HOST:PORT,..." replication routes
        self.controller_routes = dict(controller_address or {})   # node id -> controller HOST:PORT (a proxy)
        # node id (broker or voter) -> its own controller.quorum.voters (each peer voter through a proxy); nodes
        # not named use voters_setting
        self.voter_routes: dict[int, str] = {}
        ports = [base_port + i for i in range(brokers + 1)] if base_port else [free_port(host) for _ in range(brokers + 1)]
        self.controller_port, self.ports = ports[0], dict(enumerate(ports[1:]))
        self.nodes: dict[int, NodeProcess] = {}
        self.controller: NodeProcess | None = None
        # the quorum (controllers > 1): voter id -> port / process; the first voter's port is controller_port
        self.quorum = controllers > 1
        self.voter_ports: dict[int, int] = {}
        self.voters: dict[int, NodeProcess] = {}
        if self.quorum:
            more = [base_port + brokers + 1 + i for i in range(controllers - 1)] if base_port else \
                [free_port(host) for _ in range(controllers - 1)]
            self.voter_ports = dict(zip(range(CONTROLLER_ID_BASE, CONTROLLER_ID_BASE + controllers),
                                        [self.controller_port, *more], strict=True))
        self.paused: set[int] = set()

    # -- process argv -----------------------------------------------------------------------------------------

    def _common(self) -> list[str]:
        args = []
        for k, v in sorted(self.config.items()):
            args += ["--config", f"{k}={v}"]
        for f in self.faults:
            args += ["--fault", f]
        return args

    def _storage(self, name: str) -> list[str]:
        if self.data_dir is None:
            return ["--memory"]
        return ["--data-dir", str(self.data_dir / name)]

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        root = str(Path(__file__).resolve().parent.parent)
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        env.setdefault("PYTHONUNBUFFERED", "1")
        env["KCT_EXIT_WITH_PARENT"] = "1"      # nodes stop when this launcher dies without stopping them
        return env

    @property
    def voters_setting(self) -> str:
        """controller.quorum.voters: ``id@host:port,...`` ('' for a single controller)."""
        return ",".join(f"{v}@{self.host}:{p}" for v, p in sorted(self.voter_ports.items()))

    def _quorum_args(self, node_id: int) -> list[str]:
        if not self.quorum:
            return []
        return ["--config", f"controller.quorum.voters={self.voter_routes.get(node_id, self.voters_setting)}"]

    def _controller_proc(self, voter: int | None = None) -> NodeProcess:
        if voter is not None:
            port = self.voter_ports[voter]
            argv = [sys.executable, "-m", "reference_broker", "controller", "--listen", f"{self.host}:{port}",
                    *self._storage(f"controller-{voter}"), *self._common(), *self._quorum_args(voter),
                    "--config", f"node.id={voter}"]
            if self.seed is not None:
                argv += ["--seed", str(self.seed * 1000 + voter)]
            return NodeProcess(f"controller-{voter}", argv, port, self.work_dir / f"controller-{voter}.log",
                               self._env())
        argv = [sys.executable, "-m", "reference_broker", "controller", "--listen", f"{self.host}:{self.controller_port}",
                *self._storage("controller"), *self._common()]
        if self.seed is not None:
            argv += ["--seed", str(self.seed)]
        return NodeProcess("controller", argv, self.controller_port, self.work_dir / "controller.log", self._env())

    def _broker_proc(self, node_id: int) -> NodeProcess:
        controller = self.controller_routes.get(node_id, f"{self.host}:{self.controller_port}")
        argv = [sys.executable, "-m", "reference_broker", "serve", "--broker-id", str(node_id),
                "--listen", f"{self.host}:{self.ports[node_id]}", "--controller", controller,
                *self._storage(f"broker-{node_id}"), *self._common(), *self._quorum_args(node_id),
                "--ready-timeout", str(self.ready_timeout)]
        if node_id in self.advertised:
            argv += ["--config", f"advertised.listeners={self.advertised[node_id]}"]
        if node_id in self.links:
            argv += ["--config", f"replica.link.addresses={self.links[node_id]}"]
        if self.seed is not None:
            argv += ["--seed", str(self.seed * 1000 + node_id)]
        return NodeProcess(f"broker-{node_id}", argv, self.ports[node_id], self.work_dir / f"broker-{node_id}.log",
                           self._env())

    # -- lifecycle --------------------------------------------------------------------------------------------

    def start(self) -> Cluster:
        try:
            if self.quorum:
                for v in sorted(self.voter_ports):
                    self.voters[v] = self._controller_proc(v)
                    self.voters[v].start(self.ready_timeout)
            else:
                self.controller = self._controller_proc()
                self.controller.start(self.ready_timeout)
            for i in range(self.n):
                self.nodes[i] = self._broker_proc(i)
            errors: list[BaseException] = []

            def boot(node: NodeProcess) -> None:
                try:
                    node.start(self.ready_timeout)
                except BaseException as e:  # noqa: BLE001 - reported below
                    errors.append(e)
            threads = [threading.Thread(target=boot, args=(n,)) for n in self.nodes.values()]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            if errors:
                raise errors[0]
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop every broker, then the controller (resuming paused ones first so SIGTERM is handled)."""
        for node in self.nodes.values():
            node.stop(grace=5.0)
        if self.controller is not None:
            self.controller.stop(grace=5.0)
        for voter in self.voters.values():
            voter.stop(grace=5.0)
        self.paused.clear()

    def cleanup(self) -> None:
        self.stop()
        if self._tmp:
            shutil.rmtree(self.work_dir, ignore_errors=True)

    def __enter__(self) -> Cluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- views ------------------------------------------------------------------------------------------------

    @property
    def broker_ids(self) -> list[int]:
        return sorted(self.nodes)

    @property
    def bootstrap(self) -> str:
        return ",".join(self.advertised.get(i, f"{self.host}:{self.ports[i]}") for i in self.broker_ids)

    @property
    def controller_address(self) -> str:
        return f"{self.host}:{self.controller_port}"

    def pids(self) -> dict[str, int | None]:
        out: dict[str, int | None] = {}
        if self.quorum:
            out.update({f"controller-{v}": n.pid for v, n in sorted(self.voters.items())})
        else:
            out["controller"] = self.controller.pid if self.controller else None
        out.update({f"broker-{i}": n.pid for i, n in sorted(self.nodes.items())})
        return out

    def _node(self, node_id: int) -> NodeProcess:
        if node_id == -1 and self.controller is not None:
            return self.controller
        if node_id in self.voters:
            return self.voters[node_id]
        if node_id not in self.nodes:
            raise ClusterError(f"no broker {node_id} (brokers: {self.broker_ids}; -1 is the controller)")
        return self.nodes[node_id]

    # -- faults (by node id; -1 is the controller) ------------------------------------------------------------

    def kill(self, node_id: int) -> None:
        """SIGKILL: no shutdown, no flush beyond what the log already made durable."""
        self._node(node_id).kill()
        self.paused.discard(node_id)

    def pause(self, node_id: int) -> None:
        self._node(node_id).pause()
        self.paused.add(node_id)

    def resume(self, node_id: int) -> None:
        self._node(node_id).resume()
        self.paused.discard(node_id)

    def restart(self, node_id: int) -> None:
        """Stop the node if it still runs (gracefully), start it again on the same port and data dir."""
        old = self._node(node_id)
        old.stop(grace=10.0)
        self.paused.discard(node_id)
        if node_id in self.voters:
            new = self._controller_proc(node_id)
            self.voters[node_id] = new
        elif node_id == -1:
            new = self._controller_proc()
            self.controller = new
        else:
            new = self._broker_proc(node_id)
            self.nodes[node_id] = new
        new.start(self.ready_timeout)


# -- CLI ------------------------------------------------------------------------------------------------------


def add_cluster_arguments(sub: argparse._SubParsersAction) -> None:
    c = sub.add_parser("cluster", help="run a whole cluster: a controller and N brokers, one process each",
                       epilog="example: python -m reference_broker cluster --brokers 3 --data-dir /tmp/kc "
                              "--config min.insync.replicas=2")
    c.add_argument("--brokers", type=int, default=3)
    c.add_argument("--controllers", type=int, default=1,
                   help="1: a single controller (node -1); N > 1: dedicated controllers 1000.. in a Raft quorum")
    store = c.add_mutually_exclusive_group(required=True)
    store.add_argument("--data-dir", type=Path)
    store.add_argument("--memory", action="store_true")
    c.add_argument("--base-port", type=int, default=0, help="controller on P, brokers on P+1..P+N (0: free ports)")
    c.add_argument("--config", action="append", default=[], metavar="KEY=VALUE")
    c.add_argument("--fault", action="append", default=[], metavar="NAME")
    c.add_argument("--seed", type=int, default=None)
    c.add_argument("--control", type=Path, default=None, help="control socket path (default: in the work dir)")
    k = sub.add_parser("ctl", help="control a running cluster: kill|pause|resume|restart NODE, status")
    k.add_argument("--control", type=Path, required=True, help="the CONTROL socket a cluster printed")
    k.add_argument("action", choices=["kill", "pause", "resume", "restart", "status"])
    k.add_argument("node", type=int, nargs="?", default=None,
                   help="broker id (-1: the single controller; 1000..: a quorum's controllers)")


def _serve_control(cluster: Cluster, srv: socket.socket, stop: threading.Event) -> None:
    """Answer ctl requests on ``srv`` (bound and listening before CONTROL is printed) until ``stop``."""
    srv.settimeout(0.2)
    try:
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except TimeoutError:
                continue
            with conn:
                line = conn.makefile().readline().split()
                try:
                    action = line[0]
                    if action == "status":
                        reply = json.dumps({"bootstrap": cluster.bootstrap, "pids": cluster.pids(),
                                            "paused": sorted(cluster.paused)})
                    else:
                        getattr(cluster, action)(int(line[1]))
                        reply = "ok"
                except (IndexError, ValueError, AttributeError, ClusterError) as e:
                    reply = f"error: {e}"
                conn.sendall((reply + "\n").encode())
    finally:
        srv.close()


def run_cluster_cli(args: argparse.Namespace) -> int:
    from .config import BrokerConfig
    from .faults import Faults

    if args.controllers < 1:
        print("reference_broker: --controllers must be at least 1", file=sys.stderr)
        return 2
    if args.brokers < 1:
        print("reference_broker: --brokers must be at least 1", file=sys.stderr)
        return 2
    config = dict(p.split("=", 1) for p in args.config if "=" in p)
    BrokerConfig(config)                 # unknown keys or bad values: ConfigError → exit 2 in main()
    Faults(args.fault)
    if args.data_dir is not None:
        try:
            args.data_dir.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            print(f"reference_broker: cannot create data dir {args.data_dir}: {e.strerror}", file=sys.stderr)
            return 2
    work = args.data_dir or Path(tempfile.mkdtemp(prefix="kct-cluster-"))
    cluster = Cluster(args.brokers, data_dir=args.data_dir, work_dir=work, config=config, faults=args.fault,
                      seed=args.seed, base_port=args.base_port, controllers=args.controllers)
    try:
        cluster.start()
    except ClusterError as e:
        print(f"reference_broker: {e}", file=sys.stderr)
        return 2
    control = args.control or (work / "control.sock")
    control.unlink(missing_ok=True)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(str(control))          # bound before CONTROL is printed: a reader may connect at once
    srv.listen(4)
    t = threading.Thread(target=_serve_control, args=(cluster, srv, stop), daemon=True)
    t.start()
    print(f"READY {cluster.bootstrap}", flush=True)
    print(f"CONTROL {control}", flush=True)
    print(f"CONTROLLER {cluster.controller_address}", flush=True)
    if cluster.quorum:
        print(f"VOTERS {cluster.voters_setting}", flush=True)
    for name, pid in cluster.pids().items():
        print(f"NODE {name} pid={pid}", flush=True)
    try:
        while not stop.wait(0.5):
            pass
    finally:
        cluster.stop()
        control.unlink(missing_ok=True)
    return 0


def run_ctl_cli(args: argparse.Namespace) -> int:
    if args.action != "status" and args.node is None:
        print(f"reference_broker ctl: {args.action} needs a node id", file=sys.stderr)
        return 2
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(120)
            s.connect(str(args.control))
            s.sendall(f"{args.action} {'' if args.node is None else args.node}\n".encode())
            reply = s.makefile().readline().strip()
    except OSError as e:
        print(f"reference_broker ctl: cannot reach {args.control}: {e.strerror or e}", file=sys.stderr)
        return 2
    print(reply)
    return 2 if reply.startswith("error") else 0
