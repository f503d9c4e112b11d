"""Cluster model, snapshot files, Kafka JSON formats and the Kafka admin adapter."""
