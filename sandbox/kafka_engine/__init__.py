"""The `kafka` engine of the sandbox: a real Apache Kafka KRaft cluster on 127.0.0.1, from jars
fetched from Maven Central (`dist`) or an operator's unpacked distribution.

* `kreassign.sandbox.kafka_engine.dist`: find or fetch the jars, find Java.
* `kreassign.sandbox.kafka_engine.cluster.KafkaCluster`: start, steer and stop the cluster.
* `kreassign.sandbox.kafka_engine.node_config`: the nodes' configuration files (pure).
"""
