"""One module of routes per view."""
