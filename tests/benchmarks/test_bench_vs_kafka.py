"""benchmarks/bench_vs_kafka.py: the figures it reports are the ones measured (medians over repeats, failover
pooled over kills, ratio reference ÷ Kafka), and one measurement runs for real against a reference broker and leaves
nothing behind. The whole comparison (Kafka JVMs, minutes) is `bench_vs_kafka.py --quick`, not a test."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks import bench_vs_kafka as bvk  # noqa: E402
from benchmarks.measure import fetch, nodes  # noqa: E402
from fixtures import make_target  # noqa: E402


def _run(produce: float, wake: float, gaps: list[float]) -> dict:
    kills = [{"kill": i, "leader": 0, "killed_controller": False, "isr_full_before": True, "to_leader_s": g,
              "producer_gap_s": g + 1, "consumer_gap_s": None} for i, g in enumerate(gaps)]
    return {"1node": {"startup_s": 1.0, "throughput": {"produce_msgs_s": produce, "consume_msgs_s": 10.0},
                      "latency": {"wake_ack_to_answer_ms_p99": wake, "wake_ack_to_answer_ms_p50": 0.1,
                                  "max_wait_error_ms_p99": 5.0, "max_wait_error_ms_p50": 1.0}},
            "3node": {"startup_s": 2.0, "failover": kills}}


def test_summary_medians_ratios_and_pooled_failover() -> None:
    runs = [{"reference": _run(300, 1.0, [1.0]), "kafka": _run(100, 4.0, [2.0])},
            {"reference": _run(100, 3.0, [3.0]), "kafka": _run(200, 2.0, [4.0])},
            {"reference": _run(200, 2.0, [5.0]), "kafka": _run(300, 8.0, [6.0])}]
    s = bvk.summarize(runs, [2])
    assert s["produce_rf1_msgs_s"]["median"] == {"reference": 200, "kafka": 200}
    assert s["produce_rf1_msgs_s"]["ratio"] == 1.0
    assert s["wake_p99_ms"]["median"] == {"reference": 2.0, "kafka": 4.0} and s["wake_p99_ms"]["ratio"] == 0.5
    # pooled over the three repeats' kills, not a median of per-repeat figures
    assert s["failover_to_leader_s_p50"]["median"] == {"reference": 3.0, "kafka": 4.0}
    assert s["failover_to_leader_s_p99"]["median"] == {"reference": 5.0, "kafka": 6.0}
    assert s["_failover_pooled"]["kafka"]["consumer_gap_s"] == {"p50": None, "p99": None, "n": 0, "timeouts": 3}
    assert "failover_consumer_gap_s_p50" in s and s["failover_consumer_gap_s_p50"]["ratio"] is None
    text = bvk.table(s, "header")
    assert "| produce RF=1 acks=all, 100 B | msg/s | 200 | 200 | 1.00 | higher |" in text
    assert "| kill -9 leader: consumer gap p50 | s | - | - | - | lower |" in text


def test_quick_args_and_kills_spread_over_repeats() -> None:
    args = bvk.parse_args(["--quick", "--repeat", "3", "--kills", "7", "--only", "failover"])
    assert (args.records, args.samples, args.sizes, args.repeat) == (20_000, 20, [2, 10], 3)
    spread = [args.kills // args.repeat + (1 if r < args.kills % args.repeat else 0) for r in range(3)]
    assert spread == [3, 2, 2] and sum(spread) == 7


def test_latency_measurement_against_a_reference_broker(tmp_path: Path) -> None:
    target = make_target("reference", config={"memory": "true"}, work_dir=tmp_path)
    with target:
        pids = nodes.node_pids(target)
        bootstrap = target.bootstrap
        lat = fetch.latencies(bootstrap, 5, max_wait_samples=5)
    assert list(pids) == ["broker-0"]
    assert nodes.leftovers(pids, bootstrap) == []
    assert lat["samples"] == 5 and lat["answered_before_produce"] == 0
    # an idle fetch is answered at max_wait, not before (DelayedFetch): the error is not negative
    assert lat["max_wait_error_ms_p50"] >= -1.0
    assert lat["wake_ack_to_answer_ms_p50"] < fetch.PARK_MS
