"""Reporters: render an ``AuditResult`` (console, JSON, JUnit XML). They never decide verdicts."""
