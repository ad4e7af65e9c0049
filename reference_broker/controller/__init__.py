"""The KRaft-style controller: the metadata log's only writer (registrations, fencing, topics, ISR, elections)."""
