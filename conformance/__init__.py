"""Conformance suites: executable checks of Kafka semantics, each naming the rule it checks."""
