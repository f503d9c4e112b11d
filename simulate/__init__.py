"""Spark pipeline that simulates rebalances of very large clusters."""
