"""The audit pipeline as one object: plan in, reports and an exit code out."""
