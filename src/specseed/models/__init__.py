"""What every engine and the distribution oracle share: the target and draft models, their
numerics, checkpoint I/O, the built-in tiny model and ``specseed make-checkpoint``.

Imports nothing from ``specseed.engine_adapters``; ``model.py`` is the one import point of
the models. Importing this package imports no torch (its modules do).
"""
