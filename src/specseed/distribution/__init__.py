"""The distribution audit: exact target probabilities (``oracle``), the statistics that test
emitted tokens against them (``stats``, ``analysis``), and the per-token evidence between them (``evidence``: what a
bundle stores; ``collect``: the oracle's side). The ``distribution`` check
(``checks/distribution.py``) is a thin wrapper over ``collect`` and ``analysis.judge``.

Nothing here runs an engine: the oracle loads the checkpoint an engine served and computes
the target's next-token distributions itself.
"""
