"""Running: serve each run plan on an engine, record its trace, apply the checks, and emit
events; results, worker processes, and the detection matrix."""
