"""Page scripts (one per view) and the helpers they share."""
