"""kct — Kafka conformance & chaos toolkit: one command, a subcommand per tool (like pytest, jepsen, toxiproxy-cli).

examples:
  kct broker --listen 127.0.0.1:9092 --memory            # one reference broker (prints READY host:port)
  kct cluster --brokers 3 --data-dir /tmp/kc             # a reference cluster (READY bootstrap, CONTROL socket)
  kct ctl --control /tmp/kc/control.sock kill 1          # kill|pause|resume|restart a node, status
  kct suites --target reference -x                       # the conformance suites (pytest arguments pass through)
  kct suites --target kafka --target-config brokers=3    # the same suites on Apache Kafka (jars from Maven Central)
  kct diff --a reference --b kafka --out out/diff        # differential mode: same conversations, answers compared
  kct chaos run --nemesis kill,pause --duration 60s --seed 7 --out out/chaos
  kct chaos run --bootstrap 127.0.0.1:9092 --control /tmp/kc/control.sock --nemesis kill
  kct proxy serve --api 127.0.0.1:8474                   # the Toxiproxy-compatible proxy
  kct check out/chaos/RUN.jsonl                          # anomalies + linearizability of one history
  kct reports spark --histories 'out/**/*.jsonl' --out out/spark
  kct main --targets reference                           # the main job (./run main)
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence

from fixtures.factory import TARGET_NAMES


def _broker(argv: list[str]) -> int:
    from reference_broker.__main__ import main

    return int(main(["serve", *argv]))


def _reference(cmd: str) -> Callable[[list[str]], int]:
    def go(argv: list[str]) -> int:
        from reference_broker import __main__ as rb

        args = rb.build_parser().parse_args([cmd, *argv])
        # the cluster/ctl subparsers of reference_broker lack --log-level, which its main() reads
        import logging

        logging.basicConfig(level=getattr(args, "log_level", "WARNING").upper())
        from reference_broker.cluster import run_cluster_cli, run_ctl_cli

        return int((run_cluster_cli if cmd == "cluster" else run_ctl_cli)(args))

    return go


def _suites(argv: list[str]) -> int:
    import pytest

    has_pkg = any(not a.startswith("-") and a.startswith("conformance") for a in argv)
    return int(pytest.main(["--pyargs", *([] if has_pkg else ["conformance.suites"]), *argv]))


def _chaos(argv: list[str]) -> int:
    from chaos.cli import main

    return int(main(argv))


def _proxy(argv: list[str]) -> int:
    return _chaos(["proxy", *argv])


def _reports(argv: list[str]) -> int:
    from reports.__main__ import main

    return int(main(argv))


def _check(argv: list[str]) -> int:
    return _reports(["check", *argv])


def _diff(argv: list[str]) -> int:
    from conformance.diff.__main__ import main

    return int(main(argv))


def _main_job(argv: list[str]) -> int:
    from conformance.main import main

    return int(main(argv))


COMMANDS: dict[str, tuple[str, Callable[[list[str]], int]]] = {
    "broker": ("run one reference broker (reference_broker serve)", _broker),
    "cluster": ("run a reference cluster: a controller and N brokers", _reference("cluster")),
    "ctl": ("control a running reference cluster through its CONTROL socket", _reference("ctl")),
    "suites": (f"run the conformance suites with pytest (--target {'|'.join(TARGET_NAMES)} ...)", _suites),
    "diff": ("differential mode: the suites' conversations replayed on two targets, answers compared", _diff),
    "chaos": ("chaos runs, fault schedules (chaos run | nemesis plan | proxy serve)", _chaos),
    "proxy": ("the Toxiproxy-compatible proxy (proxy serve --api HOST:PORT)", _proxy),
    "check": ("check one history file (reports check)", _check),
    "reports": ("history checkers, Spark job, HTML reports (reports check|spark|conformance|run-page ...)", _reports),
    "main": ("the main job: suites -> histories -> Spark -> HTML (./run main)", _main_job),
}


def usage() -> str:
    width = max(map(len, COMMANDS))
    lines = ["usage: kct COMMAND [ARGS]   (kct COMMAND --help for a command's options)", "", "commands:"]
    lines += [f"  {name:<{width}}  {help_}" for name, (help_, _) in COMMANDS.items()]
    return "\n".join(lines) + "\n\n" + (__doc__ or "").split("\n", 2)[2]


def main(argv: Sequence[str] | None = None) -> int:
    """Dispatch to a tool's own CLI; exit codes are the tool's."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help", "help"):
        print(usage())
        return 0
    cmd, rest = args[0], args[1:]
    if cmd not in COMMANDS:
        print(f"kct: unknown command {cmd!r}\n\n{usage()}", file=sys.stderr)
        return 2
    try:
        return COMMANDS[cmd][1](rest)
    except SystemExit as e:  # argparse --help / errors inside a tool
        return int(e.code) if isinstance(e.code, int) else (0 if e.code is None else 2)


if __name__ == "__main__":
    sys.exit(main())
