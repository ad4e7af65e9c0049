"""Fuzz the HTTP API (hypothesis): whatever arrives, the answer is Toxiproxy-shaped and never a 5xx other than
Toxiproxy's own (a proxy that cannot listen answers 500 "listen tcp ..."), and the proxy keeps working."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from urllib.parse import quote

import requests
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

NAMES = st.sampled_from(["a", "b", "p-1", "kafka", "x y", "ü", "%2F", ""]) | st.text(max_size=8)
TOXIC_TYPES = st.sampled_from(["latency", "bandwidth", "slow_close", "timeout", "reset_peer", "slicer",
                               "limit_data", "kafka", "nope", ""])
SCALARS = st.none() | st.booleans() | st.integers(-2**40, 2**40) | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=6)
JSON = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6),
                                                                                         inner, max_size=3),
                    max_leaves=8)
ATTR_KEYS = st.sampled_from(["latency", "jitter", "rate", "delay", "timeout", "average_size", "size_variation",
                             "bytes", "api_key", "action", "error_code", "topic", "partition", "count",
                             "probability", "_hits", "bogus"])
ADDRESSES = st.sampled_from(["127.0.0.1:0", "localhost:0", "127.0.0.1:99999", "nohost", ":0", "0.0.0.0:0",
                             "127.0.0.1:1", "[::1]:0", ""]) | st.text(max_size=10)
PROXY_BODY = st.fixed_dictionaries({}, optional={"name": NAMES | JSON, "listen": ADDRESSES | JSON,
                                                 "upstream": ADDRESSES | JSON, "enabled": st.booleans() | JSON})
TOXIC_BODY = st.fixed_dictionaries({}, optional={
    "name": NAMES, "type": TOXIC_TYPES | JSON, "stream": st.sampled_from(["upstream", "downstream", "DownStream",
                                                                          "x"]) | JSON,
    "toxicity": st.floats(-1, 2) | JSON, "attributes": st.dictionaries(ATTR_KEYS, SCALARS, max_size=4) | JSON})
BODIES = (PROXY_BODY.map(json.dumps) | TOXIC_BODY.map(json.dumps) | JSON.map(json.dumps)
          | st.lists(PROXY_BODY, max_size=3).map(json.dumps)).map(str.encode) | st.binary(max_size=40)
PATHS = st.one_of(
    st.sampled_from(["/proxies", "/reset", "/populate", "/version", "/", "/proxies/", "//proxies"]),
    NAMES.map(lambda n: f"/proxies/{quote(n, safe='')}"),
    st.tuples(NAMES, NAMES).map(lambda t: f"/proxies/{quote(t[0], safe='')}/toxics/{quote(t[1], safe='')}"),
    NAMES.map(lambda n: f"/proxies/{quote(n, safe='')}/toxics"),
)
METHODS = st.sampled_from(["GET", "POST", "PATCH", "DELETE", "PUT"])


def _check(resp: requests.Response) -> None:
    if resp.status_code >= 500:
        body = resp.json()
        assert body["status"] == resp.status_code and body["error"].startswith("listen tcp "), body
    elif resp.status_code >= 400 and resp.headers.get("content-type", "").startswith("application/json"):
        body = resp.json()
        assert set(body) >= {"error", "status"} and body["status"] == resp.status_code


@settings(max_examples=250, deadline=None, suppress_health_check=list(HealthCheck))
@given(requests_=st.lists(st.tuples(METHODS, PATHS, BODIES), min_size=1, max_size=6))
def test_api_never_fails_on_any_input(proxy_server, requests_):
    with requests.Session() as s:
        for method, path, body in requests_:
            _check(s.request(method, proxy_server.url + path, data=body, timeout=10))
        assert s.get(proxy_server.url + "/version", timeout=10).status_code == 200


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(toxics=st.lists(TOXIC_BODY, max_size=4))
def test_proxy_keeps_pumping_after_any_toxic_requests(proxy_server, echo_server, toxics):
    url = proxy_server.url
    requests.post(f"{url}/reset", timeout=10)
    requests.delete(f"{url}/proxies/fz", timeout=10)
    listen = requests.post(f"{url}/proxies", json={"name": "fz", "upstream": echo_server.address},
                           timeout=10).json()["listen"]
    for t in toxics:
        _check(requests.post(f"{url}/proxies/fz/toxics", json=t, timeout=10))
    requests.post(f"{url}/reset", timeout=10)  # every toxic gone: bytes must flow untouched again
    host, port = listen.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(b"still-alive")
        got = b""
        while len(got) < 11:
            chunk = sock.recv(100)
            if not chunk:
                break
            got += chunk
    assert got == b"still-alive"


def test_cli_serve_prints_ready_and_stops_on_sigterm(tmp_path):
    proc = subprocess.Popen([sys.executable, "-m", "chaos", "proxy", "serve", "--api", "127.0.0.1:0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline().strip()
        assert line.startswith("READY 127.0.0.1:")
        assert requests.get(f"http://{line.split()[1]}/version", timeout=10).json()["version"]
    finally:
        proc.terminate()
        assert proc.wait(10) == 0
