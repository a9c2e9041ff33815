"""Engine adapters: turn a resolved run into a trace. See ``base.py`` for the contract."""
