"""A NaN gradient from finite values: the distance of a point to itself is 0, and the
derivative of sqrt at 0 is infinite (line 10), so backward sends inf * 0 = NaN."""

import torch

points = torch.tensor([[0.0, 0.0], [3.0, 4.0]], requires_grad=True)
anchor = torch.tensor([0.0, 0.0])
diff = points - anchor
squared = (diff * diff).sum(dim=1)
dist = torch.sqrt(squared)
loss = dist.sum()
loss.backward()
