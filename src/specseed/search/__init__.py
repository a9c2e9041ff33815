"""``specseed search``: property-based search for failing traffic (Hypothesis)."""
