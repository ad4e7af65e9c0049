"""The broker's command line: clear one-line errors and exit code 2 for what a user can get wrong."""
from __future__ import annotations

import socket
import subprocess
import sys


def _serve(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "reference_broker", "serve", *args], capture_output=True,
                          text=True, timeout=30)


def test_port_in_use():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        r = _serve("--listen", f"127.0.0.1:{port}", "--memory")
    assert r.returncode == 2
    assert f"cannot listen on 127.0.0.1:{port}" in r.stderr and "Traceback" not in r.stderr


def test_data_dir_is_a_file(tmp_path):
    f = tmp_path / "afile"
    f.write_text("not a directory")
    r = _serve("--listen", "127.0.0.1:0", "--data-dir", str(f))
    assert r.returncode == 2 and str(f) in r.stderr and "Traceback" not in r.stderr


def test_corrupt_node_metadata_refuses_to_start(tmp_path):
    (tmp_path / "node.json").write_text("{not json")
    r = _serve("--listen", "127.0.0.1:0", "--data-dir", str(tmp_path))
    assert r.returncode == 2 and "corrupt" in r.stderr


def test_bad_arguments():
    r = _serve("--listen", "nonsense", "--memory")
    assert r.returncode == 2 and "HOST:PORT" in r.stderr
    r = _serve("--listen", "127.0.0.1:0", "--memory", "--config", "no.such.key=1")
    assert r.returncode == 2 and "unknown broker config 'no.such.key'" in r.stderr
    r = _serve("--listen", "127.0.0.1:0", "--memory", "--config", "num.partitions=abc")
    assert r.returncode == 2 and "num.partitions: expected int" in r.stderr
    r = _serve("--listen", "127.0.0.1:0")
    assert r.returncode == 2 and "--data-dir" in r.stderr
