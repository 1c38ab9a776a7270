"""Two traces compared: which node is which, and what changed (torch-free)."""
