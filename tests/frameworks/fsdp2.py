"""FSDP2 fully_shard on one CPU rank (gloo): each Linear and the model sharded, 3 steps with
clip_grad_norm_ over the DTensor parameters."""
import torch
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard

dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)  # no port
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
for layer in model:
    if isinstance(layer, torch.nn.Linear):
        fully_shard(layer)
fully_shard(model)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _step in range(3):
    opt.zero_grad()
    loss = model(torch.randn(5, 4)).pow(2).mean()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 0.3)
    opt.step()
print("NORM", float(torch.stack([p.grad.full_tensor().norm() for p in model.parameters()]).norm()))
dist.destroy_process_group()
