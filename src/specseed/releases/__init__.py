"""Engine releases side by side: which releases a sweep runs, the environment each one runs
in (made with uv, cached between sweeps), and what the sweep makes of their verdicts (the
table of releases by scenario by check, the changes between neighbours, the bisection)."""
