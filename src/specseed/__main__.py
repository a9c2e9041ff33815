"""``python -m specseed`` runs the command-line interface."""

from __future__ import annotations

from specseed.cli.app import main

# Guarded: ``--jobs`` workers (forked by a forkserver, or spawned) import this module again.
if __name__ == "__main__":
    main()
