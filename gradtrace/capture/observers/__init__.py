"""The per-pass observers, what they see of a pass, and their table (table.py)."""
