"""The distribution audit: exact target probabilities (``oracle``), the statistics that test
emitted tokens against them (``stats``, ``analysis``). The ``distribution`` check
(``checks/distribution.py``) is a thin wrapper over ``analysis``.

Nothing here runs an engine: the oracle loads the checkpoint an engine served and computes
the target's next-token distributions itself.
"""
