"""Traces: the records an engine run leaves (header, steps, end), their JSONL form, and the
folder that holds one audit's trace files."""
