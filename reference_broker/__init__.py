"""The reference broker: an executable specification of Apache Kafka's broker semantics.

Layout (one hop to anything):
- ``server.py``      asyncio TCP server, framing, dispatch by API key
- ``registry.py``    handler registry; builds the ApiVersions answer from what is registered
- ``apis/``          one module per API key (``apis/fetch.py`` handles Fetch)
- ``log/``           the partition log: memory and durable segmented file implementations
- ``partition.py``   a partition replica: log, leadership, ISR, high watermark, leader reads
                     (``fetch_records``) and follower appends and truncation
- ``replica_manager.py`` the partitions a broker hosts and the read path (``fetch_messages``: read, park,
                     complete), ISR upkeep; ``replica_fetcher.py`` follower replication
- ``purgatory.py``   DelayedFetch / DelayedProduce: parked requests and their completion rules
- ``node.py``        one broker process: listener, metadata image, replica manager, link to the controller
- ``client/``        the reference client stack (protocol client, producer, consumer, admin)
- ``GAPS.md``        every deliberate difference from Apache Kafka, in one place
"""
