"""From torch's autograd objects to the plain Trace: the walk, node records, summaries."""
