"""Developer tools (the graph-dump CLI lands here with its issue)."""
