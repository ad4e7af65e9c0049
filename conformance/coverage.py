"""Teeth: which reference-broker fault switch breaks which rule — the rule × switch matrix.

Why: a check that cannot fail proves nothing. Each switch in ``reference_broker/faults.py`` breaks a rule on
purpose; ``BREAKS`` lists, per switch, the rules whose checks must diverge under it (and no others).
``tests/conformance/test_conformance_suites.py`` runs the suites with each switch and asserts exactly that, so this
table is measured, not claimed; the HTML report shows it as "rule coverage". A rule with no switch here has checks
nobody has yet shown able to fail.
"""
from __future__ import annotations

from collections.abc import Iterable

# switch → rules whose checks diverge under it (every entry has a row in the FAULTS table of the tests).
BREAKS: dict[str, tuple[str, ...]] = {
    "fetch.min_bytes_exclusive": ("FETCH-MINBYTES-GE",),
    "fetch.no_wake_on_append": ("FETCH-WAKE-ON-APPEND",),
    "fetch.ignore_max_wait": ("FETCH-MAXWAIT-IDLE",),
    "fetch.zero_wait_parks": ("FETCH-MAXWAIT-ZERO",),
    "fetch.oor_as_empty": ("FETCH-OOR-ABOVE-LEO",),
    "list_offsets.earliest_is_zero": ("LIST-OFFSETS-EARLIEST",),
    "list_offsets.timestamp_exclusive": ("LIST-OFFSETS-TIMESTAMP",),
    "offsets.accept_stale_generation": ("OFFSETS-COMMIT-GENERATION",),
    "offsets.forget_on_restart": ("OFFSETS-DURABLE",),
    "group.describe_unknown_empty": ("GROUP-DESCRIBE-DEAD",),
    "produce.ignore_min_insync": ("ACKS-ALL-MIN-ISR", "ACKS-ALL-AFTER-SHRINK"),
    "isr.hw_is_leader_leo": ("HW-MIN-LEO-ISR",),
    "isr.never_shrink": ("ISR-SHRINK-LAG",),
    "isr.shrink_early": ("ISR-SHRINK-LAG",),
    "isr.never_expand": ("ISR-EXPAND",),
    "produce.acks_all_ok_after_shrink": ("ACKS-ALL-AFTER-APPEND",),
    "replication.truncate_to_hw": ("HW-FAILOVER",),
    "replication.ignore_diverging_epoch": ("TRUNCATE-BY-EPOCH",),
    # fetch
    "fetch.read_past_hw": ("FETCH-HW-CAP",),
    "fetch.ignore_partition_max_bytes": ("FETCH-PARTITION-MAX-BYTES",),
    "fetch.max_bytes_per_partition": ("FETCH-MAX-BYTES",),
    "fetch.no_min_one": ("FETCH-FIRST-BATCH-WHOLE",),
    "fetch.expired_at_leo_oor": ("FETCH-AT-LEO-EMPTY",),
    "fetch.serve_below_log_start": ("FETCH-OOR-BELOW-LOG-START",),
    "fetch.min_bytes_per_partition": ("FETCH-MULTI-PARTITION",),
    "fetch.mid_batch_skips_batch": ("FETCH-MID-BATCH",),
    "fetch.min_bytes_uncapped": ("FETCH-MINBYTES-PARTITION-CAP",),
}


def switches_by_rule(rule_ids: Iterable[str]) -> dict[str, list[str]]:
    """{rule id: [switches that break it]} for every given rule (an empty list: no teeth yet)."""
    out: dict[str, list[str]] = {r: [] for r in rule_ids}
    for switch, rules in BREAKS.items():
        for r in rules:
            if r in out:
                out[r].append(switch)
    return out
