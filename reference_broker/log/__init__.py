"""Partition logs: the contract (``base``), batch header helpers (``batch``), memory and durable file logs."""
