"""The audit pipeline as one object: plan in, reports and an exit code out.

``audit.Audit`` is what ``specseed audit`` calls after parsing its flags, and what a library
caller uses to run an audit; ``outputs.AuditOutputs`` says what it writes; ``exit_codes``
holds the numbers the CLI exits with. This package stays light (no torch on import).
"""
