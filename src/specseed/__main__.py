"""``python -m specseed`` runs the command-line interface."""

from __future__ import annotations

from specseed.cli.app import main

main()
