"""Hypothesis state machines that drive a target and compare every answer with a simple model of Kafka rules."""
