"""Command-line interface: thin Typer commands that call library code (no logic here)."""
