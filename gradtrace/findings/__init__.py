"""Analysis over a Trace (torch-free): one registry of codes, a module per finding family."""
