"""The workflows: each thing a user asks of specseed (an audit, a replay, a minimization,
the detection matrix) as one object that the CLI, the Python API and the pytest plugin call.

``session.EngineSession`` owns an engine's lifetime (loaded once, its log captured,
interrupts honoured, closed); ``base.Workflow`` holds what every workflow shares (the bundle
folder's lock, the bundle, one event stream, the documents, the exit code); ``audit.Audit``,
``replay.Replay``, ``minimize.Minimize`` and ``matrix.Matrix`` are built on them.
``outputs.AuditOutputs`` says what a workflow writes; ``exit_codes`` holds the numbers the
CLI exits with. This package stays light (no torch on import).
"""
