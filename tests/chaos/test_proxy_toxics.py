"""The proxy driven by the unmodified toxiproxy-python client: every toxic measured from the client side."""

from __future__ import annotations

import socket
import statistics
import time

import pytest
import requests
from toxiproxy.exceptions import InvalidToxic, NotFound, ProxyExists


def _connect(listen: str, timeout: float = 5.0) -> socket.socket:
    host, port = listen.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=timeout)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def _rtt(sock: socket.socket, n: int = 7) -> float:
    """Median round trip of a small echo, seconds."""
    times = []
    for i in range(n):
        msg = f"ping-{i}".encode()
        t0 = time.monotonic()
        sock.sendall(msg)
        got = b""
        while len(got) < len(msg):
            got += sock.recv(100)
        times.append(time.monotonic() - t0)
    return statistics.median(times)


def _recv_all(sock: socket.socket, limit: float = 10.0) -> bytes:
    out = bytearray()
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        data = sock.recv(65536)
        if not data:
            break
        out += data
    return bytes(out)


def test_proxy_lifecycle_and_version(toxiproxy, echo_server):
    assert b'"version"' in toxiproxy.version()
    proxy = toxiproxy.create(upstream=echo_server.address, name="echo")
    assert proxy.enabled and proxy.listen.startswith("127.0.0.1:")
    assert set(toxiproxy.proxies()) == {"echo"}
    with pytest.raises(ProxyExists):
        toxiproxy.create(upstream=echo_server.address, name="echo")
    with _connect(proxy.listen) as sock:
        assert _rtt(sock, 1) < 1
    assert proxy.destroy()
    assert toxiproxy.proxies() == {}
    with pytest.raises(NotFound):
        proxy.destroy()


def test_latency_added_within_ten_percent(toxiproxy, echo_server):
    proxy = toxiproxy.create(upstream=echo_server.address, name="lat")
    with _connect(proxy.listen) as sock:
        base = _rtt(sock)
        proxy.add_toxic(type="latency", stream="downstream", attributes={"latency": 100, "jitter": 0})
        proxy.add_toxic(type="latency", stream="upstream", attributes={"latency": 50})
        added = _rtt(sock) - base
    assert abs(added - 0.150) <= 0.015, f"added {added * 1000:.1f} ms, set 150 ms"


def test_jitter_stays_in_range(toxiproxy, echo_server):
    proxy = toxiproxy.create(upstream=echo_server.address, name="jit")
    proxy.add_toxic(type="latency", attributes={"latency": 60, "jitter": 20})
    with _connect(proxy.listen) as sock:
        rtts = [_rtt(sock, 1) for _ in range(8)]
    assert all(0.038 <= r <= 0.095 for r in rtts), rtts


def test_bandwidth_measured(toxiproxy, source_server):
    source_server.state["size"] = 300_000
    proxy = toxiproxy.create(upstream=source_server.address, name="bw")
    proxy.add_toxic(type="bandwidth", attributes={"rate": 500})  # KB/s
    with _connect(proxy.listen) as sock:
        t0 = time.monotonic()
        data = _recv_all(sock)
        elapsed = time.monotonic() - t0
    assert len(data) == 300_000
    rate = len(data) / elapsed / 1000
    assert 400 <= rate <= 560, f"measured {rate:.0f} KB/s for rate=500"


def test_limit_data_cuts_after_n_bytes(toxiproxy, source_server):
    proxy = toxiproxy.create(upstream=source_server.address, name="limit")
    proxy.add_toxic(type="limit_data", attributes={"bytes": 1000})
    with _connect(proxy.listen) as sock:
        data = _recv_all(sock)
    assert data == bytes(i % 251 for i in range(1000))


def test_reset_peer_resets(toxiproxy, echo_server):
    proxy = toxiproxy.create(upstream=echo_server.address, name="rst")
    proxy.add_toxic(type="reset_peer", stream="upstream", attributes={"timeout": 0})
    with _connect(proxy.listen) as sock:
        sock.sendall(b"hello")
        with pytest.raises(ConnectionResetError):
            sock.recv(100)


def test_disabled_proxy_refuses_and_closes(toxiproxy, echo_server):
    proxy = toxiproxy.create(upstream=echo_server.address, name="down")
    with _connect(proxy.listen) as open_sock:
        with proxy.down():
            assert open_sock.recv(100) == b""  # the open connection was closed
            with pytest.raises(ConnectionRefusedError):
                _connect(proxy.listen, timeout=1).close()
            assert toxiproxy.get_proxy("down").enabled is False
    with _connect(proxy.listen) as sock:  # enabled again, same address
        assert _rtt(sock, 1) < 1


def test_slicer_delivers_everything_in_pieces(toxiproxy, source_server):
    source_server.state["size"] = 20_000
    proxy = toxiproxy.create(upstream=source_server.address, name="slice")
    proxy.add_toxic(type="slicer", attributes={"average_size": 100, "size_variation": 50, "delay": 10})
    with _connect(proxy.listen) as sock:
        data = _recv_all(sock)
    assert data == bytes(i % 251 for i in range(20_000))


def test_timeout_stops_data_then_closes(toxiproxy, echo_server):
    proxy = toxiproxy.create(upstream=echo_server.address, name="to")
    proxy.add_toxic(type="timeout", attributes={"timeout": 300})
    with _connect(proxy.listen) as sock:
        t0 = time.monotonic()
        sock.sendall(b"hello")
        assert sock.recv(100) == b""
        assert 0.25 <= time.monotonic() - t0 <= 1.5


def test_slow_close_delays_the_close(toxiproxy, source_server):
    source_server.state["size"] = 10
    proxy = toxiproxy.create(upstream=source_server.address, name="slow")
    proxy.add_toxic(type="slow_close", attributes={"delay": 300})
    with _connect(proxy.listen) as sock:
        t0 = time.monotonic()
        assert _recv_all(sock) == bytes(range(10))
        assert time.monotonic() - t0 >= 0.28


def test_toxicity_zero_never_applies(toxiproxy, echo_server):
    proxy = toxiproxy.create(upstream=echo_server.address, name="tox0")
    proxy.add_toxic(type="latency", toxicity=0.0, attributes={"latency": 500})
    with _connect(proxy.listen) as sock:
        assert _rtt(sock, 3) < 0.1


def test_removing_latency_flushes_held_bytes(toxiproxy, echo_server):
    proxy = toxiproxy.create(upstream=echo_server.address, name="flush")
    proxy.add_toxic(type="latency", attributes={"latency": 5000})
    with _connect(proxy.listen) as sock:
        sock.sendall(b"held")
        time.sleep(0.2)
        t0 = time.monotonic()
        proxy.destroy_toxic("latency_downstream")
        assert sock.recv(100) == b"held"
        assert time.monotonic() - t0 < 1.0


def test_bad_input_gets_toxiproxy_errors(toxiproxy, proxy_server, echo_server):
    proxy = toxiproxy.create(upstream=echo_server.address, name="bad")
    with pytest.raises(InvalidToxic):
        proxy.add_toxic(type="no_such_toxic")
    with pytest.raises(InvalidToxic):
        proxy.add_toxic(type="latency", attributes={"latncy": 10})  # typo: refused, never silently ignored
    with pytest.raises(InvalidToxic):
        proxy.add_toxic(type="latency", stream="sideways")
    proxy.add_toxic(type="latency", attributes={"latency": 1})
    with pytest.raises(ProxyExists):  # 409 toxic already exists
        proxy.add_toxic(type="latency", attributes={"latency": 1})
    url = proxy_server.url
    r = requests.post(f"{url}/proxies", data=b"{not json", timeout=5)
    assert r.status_code == 400 and r.json()["error"].startswith("bad request body")
    r = requests.get(f"{url}/proxies/nope", timeout=5)
    assert (r.status_code, r.json()) == (404, {"error": "proxy not found", "status": 404})
    r = requests.get(f"{url}/proxies/bad/toxics/nope", timeout=5)
    assert (r.status_code, r.json()) == (404, {"error": "toxic not found", "status": 404})
    r = requests.post(f"{url}/proxies", json={"name": "x"}, timeout=5)
    assert r.json() == {"error": "missing required field: upstream", "status": 400}
    r = requests.post(f"{url}/proxies", json={"name": "taken", "upstream": echo_server.address,
                                              "listen": proxy.listen}, timeout=5)
    assert r.status_code == 500 and "address already in use" in r.json()["error"]
    assert requests.delete(f"{url}/proxies/bad/toxics/latency_downstream", timeout=5).status_code == 204
    assert requests.post(f"{url}/reset", timeout=5).status_code == 204
    r = requests.post(f"{url}/populate", json=[{"name": "p1", "upstream": echo_server.address,
                                                "listen": "127.0.0.1:0"}], timeout=5)
    assert r.status_code == 201 and r.json()["proxies"][0]["name"] == "p1"
    assert requests.put(f"{url}/proxies", timeout=5).status_code == 405
    assert requests.get(f"{url}/nothing", timeout=5).status_code == 404
