"""The data every layer shares: the defect catalogue, RNG layout contracts, typed errors,
how seeds are written, and wording helpers. Imports nothing heavy."""
