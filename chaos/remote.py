"""Process faults on clusters the toolkit did not start, Jepsen's way: one shell command template per verb.

    chaos run --bootstrap kafka-1:9092 --allow-remote \
        --control-cmd 'kill=ssh {host} sudo systemctl kill -s KILL kafka' \
        --control-cmd 'restart=ssh {host} sudo systemctl restart kafka' \
        --control-cmd 'pause=ssh {host} sudo systemctl kill -s STOP kafka' \
        --control-cmd 'resume=ssh {host} sudo systemctl kill -s CONT kafka' --dry-run

Verbs: kill, pause, resume, restart (a nemesis needs the verbs it uses: kill and restart for `kill`, pause and resume
for `pause`). Placeholders: {node} (the node id), {host} and {port} (the address the cluster's Metadata gives for
that broker). The nodes are the brokers of the cluster's own Metadata answer; the active controller is asked with
DescribeQuorum. Safety: every broker host must be loopback unless `allow_remote` (the bootstrap check is the CLI's);
a dry run prints every command each node's fault would run, and runs none. A command that fails (non-zero exit,
timeout) is an error of that fault, recorded in the history like any other.
"""

from __future__ import annotations

import shlex
import string
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

VERBS = ("kill", "pause", "resume", "restart")
PLACEHOLDERS = frozenset({"node", "host", "port"})
LOOPBACK = ("127.", "localhost", "::1")


class ControlCommandError(ValueError):
    """Bad --control-cmd (unknown verb, placeholder, malformed template): a usage error, nothing runs."""


def parse_templates(items: Iterable[str]) -> dict[str, str]:
    """["verb=command template", ...] -> {verb: template}; every verb known, every placeholder known, once each."""
    out: dict[str, str] = {}
    for item in items:
        verb, sep, template = item.partition("=")
        verb, template = verb.strip(), template.strip()
        if not sep or not template:
            raise ControlCommandError(f"--control-cmd {item!r}: expected VERB=COMMAND (verbs: {', '.join(VERBS)})")
        if verb not in VERBS:
            raise ControlCommandError(f"--control-cmd {item!r}: unknown verb {verb!r} (verbs: {', '.join(VERBS)})")
        if verb in out:
            raise ControlCommandError(f"--control-cmd {verb}= given twice")
        try:
            names = {f for _, f, _, _ in string.Formatter().parse(template) if f is not None}
        except ValueError as exc:
            raise ControlCommandError(f"--control-cmd {item!r}: {exc}") from None
        unknown = sorted(names - PLACEHOLDERS)
        if unknown:
            raise ControlCommandError(f"--control-cmd {item!r}: unknown placeholder(s) {unknown} "
                                      f"(known: {{node}}, {{host}}, {{port}})")
        out[verb] = template
    return out


@dataclass
class CommandTarget:
    """The fault verbs of a live cluster as shell commands; the Target-like object nemeses act on."""

    bootstrap: str
    templates: Mapping[str, str]
    brokers: Mapping[int, tuple[str, int]]          # node id -> (host, port) from the cluster's Metadata
    timeout_s: float = 120.0
    name: str = "live"

    @classmethod
    def discover(cls, bootstrap: str, templates: Mapping[str, str], *, allow_remote: bool,
                 timeout_s: float = 120.0) -> CommandTarget:
        """The cluster's brokers from Metadata (through the bootstrap); refuses a non-loopback broker unless
        `allow_remote` — a bootstrap on loopback can still advertise brokers elsewhere."""
        from fixtures.net import cluster_view, parse_bootstrap

        view = None
        errors = []
        for host, port in parse_bootstrap(bootstrap):
            try:
                view = cluster_view(host, port)
                break
            except Exception as exc:  # noqa: BLE001 - try the next bootstrap address
                errors.append(f"{host}:{port}: {exc}")
        if view is None:
            raise ControlCommandError(f"cannot read the cluster's brokers: {'; '.join(errors)}")
        remote = sorted(f"{b}={h}" for b, (h, _p) in view.brokers.items() if not h.startswith(LOOPBACK))
        if remote and not allow_remote:
            raise ControlCommandError(f"brokers {', '.join(remote)} are not on loopback: command-template faults "
                                      "against a remote cluster need --allow-remote")
        return cls(bootstrap, dict(templates), dict(view.brokers), timeout_s)

    # -- rendering (also what --dry-run prints)
    def render(self, verb: str, node: int) -> str:
        template = self.templates.get(verb)
        if template is None:
            raise RuntimeError(f"no --control-cmd {verb}=... given: cannot {verb} node {node}")
        if node not in self.brokers:
            raise RuntimeError(f"node {node} is not a broker of this cluster ({sorted(self.brokers)})")
        host, port = self.brokers[node]
        return template.format(node=node, host=shlex.quote(host), port=port)

    def plan_lines(self) -> list[str]:
        """Every command a fault could run, per verb and node (the dry run)."""
        return [f"{verb:8s} node {node}: {self.render(verb, node)}"
                for verb in VERBS if verb in self.templates for node in sorted(self.brokers)]

    # -- the verbs nemeses call
    def _run(self, verb: str, node: int) -> None:
        cmd = self.render(verb, node)
        try:
            out = subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=self.timeout_s)
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"{verb} node {node}: `{cmd}` did not finish within {self.timeout_s:g} s") from None
        if out.returncode != 0:
            raise RuntimeError(f"{verb} node {node}: `{cmd}` exited {out.returncode}: "
                               f"{(out.stderr or out.stdout).strip()[-300:]}")

    @property
    def broker_ids(self) -> list[int]:
        return sorted(self.brokers)

    @property
    def controller_ids(self) -> list[int]:
        return []

    def active_controller(self) -> int | None:
        from fixtures.net import quorum_leader

        for host, port in self.brokers.values():
            try:
                return quorum_leader(host, port)
            except Exception:  # noqa: BLE001 - ask the next broker
                continue
        return None

    def kill_broker(self, node: int) -> None:
        self._run("kill", node)

    def pause_broker(self, node: int) -> None:
        self._run("pause", node)

    def resume_broker(self, node: int) -> None:
        self._run("resume", node)

    def restart(self, node: int) -> None:
        self._run("restart", node)
