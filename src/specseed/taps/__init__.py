"""Taps: in-process observers of the functions through which an engine draws random numbers."""
