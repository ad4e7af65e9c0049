"""The reference broker: an executable specification of Apache Kafka's broker semantics.

Layout (one hop to anything):
- ``server.py``      asyncio TCP server, framing, dispatch by API key
- ``registry.py``    handler registry; builds the ApiVersions answer from what is registered
- ``apis/``          one module per API key (``apis/fetch.py`` handles Fetch)
- ``log/``           the partition log: memory and durable segmented file implementations
- ``partition.py``   a partition's state: log, high watermark, parked-fetch wakeups
- ``purgatory.py``   DelayedFetch: parked fetches and their completion rules
- ``broker.py``      the state a broker owns (topics, partitions, config) on its one event loop
- ``client/``        the reference client stack (protocol client, producer, consumer, admin)
- ``GAPS.md``        every deliberate difference from Apache Kafka, in one place
"""
