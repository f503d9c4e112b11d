"""A local multi-broker cluster that speaks the Kafka wire protocol."""
