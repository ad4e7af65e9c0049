"""History checkers, the PySpark aggregation job and HTML reports. Reads histories, never brokers."""
