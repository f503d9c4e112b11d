"""Throttle configs, the replication model behind every ETA, estimate, schedules and suggest."""
