"""How much `gradtrace check` does in full before it samples (torch-free: the CLI reads it)."""

# Jacobian entries checked in full: gradcheck holds ~100 B an entry (1e6: ~100 MB).
MAX_JACOBIAN = 1_000_000
SAMPLE = 32  # above it: random coordinates of each input and each output checked
TABLE_LIMIT = 4096  # Jacobians with more entries are summarised, not listed
