"""Scenarios: the model.yaml and scenario schemas, their loader, and the built-in library."""
