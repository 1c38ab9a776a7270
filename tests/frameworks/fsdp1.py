"""FSDP1 (FullyShardedDataParallel) on one CPU rank (gloo): 3 steps with its clipping."""
import torch
import torch.distributed as dist
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)  # no port
torch.manual_seed(0)
net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
model = FSDP(net, use_orig_params=True, device_id=torch.device("cpu"))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _step in range(3):
    opt.zero_grad()
    loss = model(torch.randn(5, 4)).pow(2).mean()
    loss.backward()
    model.clip_grad_norm_(1.0)
    opt.step()
print("NORM", float(torch.stack([p.grad.norm() for p in model.parameters()]).norm()))
dist.destroy_process_group()
