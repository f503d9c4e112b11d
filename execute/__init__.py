"""Live reassignment operations: execute, verify, cancel, resume, abort, the journal, pacing and watch."""
