"""nn.Module hooks: which module made a node, the nodes its backward hooks run on, DDP."""
