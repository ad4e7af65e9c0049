"""Fault injection, workloads that record Jepsen-style histories, and the chaos CLI."""
