"""A .grad that is not what autograd delivered: a post-accumulate-grad hook clips each
gradient as it lands, as DistributedDataParallel averages it over the ranks. The graph shows
the gradient that reached AccumulateGrad; .grad holds the clipped one."""

import torch


def clip(p):
    p.grad.clamp_(-1.0, 1.0)


w = torch.tensor([0.5, 2.0, -3.0], requires_grad=True)
w.register_post_accumulate_grad_hook(clip)
x = torch.tensor([1.0, 2.0, 3.0])
loss = (w * x).pow(2).sum()
loss.backward()
print(w.grad)
