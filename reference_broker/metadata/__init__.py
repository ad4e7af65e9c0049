"""Cluster metadata: the record types of the metadata log and the image they build (KRaft's MetadataImage)."""
