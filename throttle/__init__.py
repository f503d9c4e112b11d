"""Throttle configs, the replication model, schedules and the pacing loop."""
