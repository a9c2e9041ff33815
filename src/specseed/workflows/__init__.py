"""The workflows: each one thing a user asks of specseed (an audit, a replay, a minimization,
the detection matrix) as one object that the CLI, the Python API and the pytest plugin call.

``audit.Audit`` is what ``specseed audit`` calls after parsing its flags, and what a library
caller uses to run an audit; ``outputs.AuditOutputs`` says what it writes; ``exit_codes``
holds the numbers the CLI exits with. This package stays light (no torch on import).
"""
