"""The guardian: undoes a crashed run's faults on a cluster the run did not start.

Why: a run's `finally` heals every fault on Ctrl-C and SIGTERM, but a SIGKILLed (or OOM-killed, or power-cut) run
has no `finally`. On a cluster it started itself the process supervisor's watchdog takes the whole cluster down; on
a live cluster (--control, --control-cmd, --proxy-api) the paused broker would stay SIGSTOPped and the cut proxy
disabled. So before the first fault the run starts this small process in its own session (a Ctrl-C to the run's
terminal does not reach it) and, before each fault verb, tells it the verb's undo over a pipe (write-ahead); after
each undo it tells it the entry is gone. When the pipe closes — the run exited, cleanly or not — the guardian
applies what is still outstanding, newest first, and logs each action. After a clean run nothing is outstanding.

    undo entries:  ["resume", node]  ["restart", node]  ["enable", proxy]  ["untoxic", proxy, toxic]

Wire format: first line the cluster-control spec (JSON: bootstrap, control socket, command templates with the
broker map they render with, proxy API), then one JSON line per change: {"add": entry} / {"del": entry}.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

Entry = tuple[Any, ...]


class Guardian:
    """The run's side: starts the guardian process and journals each fault verb's undo before the verb runs."""

    def __init__(self, spec: Mapping[str, Any], log: Path) -> None:
        log.parent.mkdir(parents=True, exist_ok=True)
        self._log_path = log
        self._log = log.open("a")
        self._proc = subprocess.Popen([sys.executable, "-m", "chaos.guardian"], stdin=subprocess.PIPE,
                                      stdout=self._log, stderr=self._log, text=True, start_new_session=True)
        self._send(dict(spec))

    def _send(self, msg: Any) -> None:
        assert self._proc.stdin is not None
        self._proc.stdin.write(json.dumps(msg) + "\n")
        self._proc.stdin.flush()

    def will_undo(self, *entry: Any) -> None:
        self._send({"add": list(entry)})

    def undone(self, *entry: Any) -> None:
        self._send({"del": list(entry)})

    def close(self, timeout_s: float = 300.0) -> int | None:
        """End of the run: the guardian applies whatever is still outstanding (nothing after a clean run)."""
        if self._proc.stdin is not None and not self._proc.stdin.closed:
            self._proc.stdin.close()
        try:
            rc = self._proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            rc = self._proc.wait(10)
        self._log.close()
        if self._log_path.stat().st_size == 0:
            self._log_path.unlink()  # nothing was left to undo: no file
        return rc


class GuardedTarget:
    """The run's target with each fault verb journalled (same verbs; everything else passed through)."""

    def __init__(self, inner: Any, guardian: Guardian) -> None:
        self._inner, self._g = inner, guardian

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def kill_broker(self, b: int) -> None:
        self._g.will_undo("restart", b)
        self._inner.kill_broker(b)

    def restart(self, b: int) -> None:
        self._inner.restart(b)
        self._g.undone("restart", b)

    def pause_broker(self, b: int) -> None:
        self._g.will_undo("resume", b)
        self._inner.pause_broker(b)

    def resume_broker(self, b: int) -> None:
        self._inner.resume_broker(b)
        self._g.undone("resume", b)


class GuardedProxies:
    """The run's Toxiproxy client with every disable and toxic journalled."""

    def __init__(self, inner: Any, guardian: Guardian) -> None:
        self._inner, self._g = inner, guardian

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def set_enabled(self, name: str, enabled: bool) -> Any:
        if not enabled:
            self._g.will_undo("enable", name)
        out = self._inner.set_enabled(name, enabled)
        if enabled:
            self._g.undone("enable", name)
        return out

    def add_toxic(self, proxy: str, type_: str, *, name: str | None = None, **kw: Any) -> Any:
        if name is None:  # Toxiproxy names it <type>_<stream>; the undo needs the name
            name = f"{type_}_{kw.get('stream', 'downstream')}"
        self._g.will_undo("untoxic", proxy, name)
        return self._inner.add_toxic(proxy, type_, name=name, **kw)

    def remove_toxic(self, proxy: str, name: str) -> None:
        self._inner.remove_toxic(proxy, name)
        self._g.undone("untoxic", proxy, name)


# ------------------------------------------------------------------------------------------------ guardian process
def _control(spec: Mapping[str, Any]) -> Any:
    if spec.get("control"):
        from .control_socket import ControlSocketTarget

        return ControlSocketTarget(spec["control"], spec.get("bootstrap", ""))
    if spec.get("templates"):
        from .remote import CommandTarget

        brokers = {int(k): (h, int(p)) for k, (h, p) in spec["brokers"].items()}
        return CommandTarget(spec.get("bootstrap", ""), dict(spec["templates"]), brokers)
    return None


def undo(entry: Entry, spec: Mapping[str, Any]) -> None:
    """Apply one outstanding undo (a fresh control object per action: the cluster may have changed meanwhile)."""
    verb = entry[0]
    if verb in ("resume", "restart"):
        target = _control(spec)
        if target is None:
            raise RuntimeError(f"{verb} {entry[1]}: the run had no process control")
        (target.resume_broker if verb == "resume" else target.restart)(int(entry[1]))
    elif verb in ("enable", "untoxic"):
        from .faults import ToxiproxyClient

        client = ToxiproxyClient(spec["proxy_api"])
        if verb == "enable":
            client.set_enabled(entry[1], True)
        else:
            client.remove_toxic(entry[1], entry[2])
    else:
        raise ValueError(f"unknown undo {entry!r}")


def serve(stream: IO[str], out: IO[str]) -> int:
    """Read the journal until EOF, then undo what is outstanding, newest first; 1 if any undo failed."""
    first = stream.readline()
    if not first.strip():
        return 0
    spec = json.loads(first)
    outstanding: list[Entry] = []
    for line in stream:
        try:
            msg = json.loads(line)
        except ValueError:
            continue  # a line cut by the run's death: the entry before it is what counts
        if "add" in msg:
            outstanding.append(tuple(msg["add"]))
        elif "del" in msg and tuple(msg["del"]) in outstanding:
            # the newest equal entry: a broker paused twice is resumed twice
            i = len(outstanding) - 1 - outstanding[::-1].index(tuple(msg["del"]))
            del outstanding[i]
    rc = 0
    for entry in reversed(outstanding):
        for attempt in range(3):
            try:
                undo(entry, spec)
                print(f"{time.strftime('%H:%M:%S')} guardian: undid {json.dumps(list(entry))} (the run ended with it applied)",
                      file=out, flush=True)
                break
            except Exception as e:  # noqa: BLE001 - try again, then the next entry
                if attempt == 2:
                    print(f"guardian: could not undo {json.dumps(list(entry))}: {type(e).__name__}: {e}", file=out, flush=True)
                    rc = 1
                time.sleep(1.0)
    return rc


def main() -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)   # the run handles Ctrl-C; this process outlives only a crash
    return serve(sys.stdin, sys.stdout)


if __name__ == "__main__":
    sys.exit(main())
