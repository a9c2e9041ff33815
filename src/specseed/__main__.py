"""``python -m specseed`` runs the command-line interface."""

from __future__ import annotations

from specseed.cli.entry import main

# Guarded: ``--jobs`` workers (forked by a forkserver, or spawned) import this module again,
# and get only the light entry point (see ``specseed.cli.entry``).
if __name__ == "__main__":
    main()
