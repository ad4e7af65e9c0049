"""The catalogue of Kafka rules the suites check: id, one-line statement, source (KIP or Kafka class and case).

Every check names its rules with ``@pytest.mark.rule("FETCH-MAXWAIT", ...)``; reports group results by rule.
Suite modules declare the rules they check with ``rule(...)`` at import time; ids are unique across suites.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Rule:
    id: str
    statement: str
    source: str
    suite: str


RULES: dict[str, Rule] = {}


def rule(id: str, statement: str, source: str, suite: str) -> Rule:
    """Declare a rule; a second declaration of the same id is a programming error."""
    if id in RULES and RULES[id] != Rule(id, statement, source, suite):
        raise ValueError(f"rule {id} declared twice with different text")
    RULES[id] = r = Rule(id, statement, source, suite)
    return r


def get(id: str) -> Rule:
    try:
        return RULES[id]
    except KeyError:
        raise KeyError(f"unknown rule id {id!r}; known: {', '.join(sorted(RULES))}") from None
