"""The command-line front doors: Kafka-compatible flags and kreassign subcommands."""
