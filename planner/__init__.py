"""Pure planning: Kafka-compatible generate, balanced strategies, plan diff and metrics."""
