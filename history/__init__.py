"""The history contract shared by every workload, suite and checker (see history/schema.py)."""
