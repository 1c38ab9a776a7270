"""FSDP2 with parameters of the root module's own (an embedding, a head): fully_shard leaves
them unsharded from forward to the end of backward, then swaps the sharded ones back. Two
micro-batches a step (the first without gradient sync: .grad stays on the unsharded tensors;
the second reduce-scatters into the sharded .grad's local tensor), one forward
after the last step. Prints each pass's local .grad norms and, at the end, each whole .grad's
norm (a collective): one rank, or each under torchrun."""
import json
import os

import torch
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard

if "RANK" in os.environ:
    dist.init_process_group("gloo")
else:
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)  # no port
rank = dist.get_rank()
torch.manual_seed(0)


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.tok_embeddings = torch.nn.Embedding(10, 4)
        self.layers = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(),
                                          torch.nn.Linear(8, 4))
        self.out = torch.nn.Linear(4, 1)

    def forward(self, idx):
        return self.out(self.layers(self.tok_embeddings(idx)))


model = Net()
for layer in model.layers:
    if isinstance(layer, torch.nn.Linear):
        fully_shard(layer)
fully_shard(model)
embedding = model.tok_embeddings.weight  # a plain name for a parameter: no second row of it
opt = torch.optim.SGD(model.parameters(), lr=0.1)
torch.manual_seed(rank + 1)
# each sharded parameter's two tensors (FSDP2's own fields: the script reads where .grad is)
unsharded_of = {id(fp.sharded_param): fp for m in model.modules()
                if hasattr(m, "_get_fsdp_state") and m._get_fsdp_state()._fsdp_param_group
                for fp in m._get_fsdp_state()._fsdp_param_group.fsdp_params}


def held(p):
    """The .grad of p's parameter: its unsharded tensor's after a pass without sync, else
    the sharded one's local shard."""
    unsharded = getattr(unsharded_of[id(p)], "_unsharded_param", None)
    return unsharded.grad if unsharded is not None and unsharded.grad is not None \
        else p.grad.to_local()


for micro_batch in range(4):
    if micro_batch % 2 == 0:
        opt.zero_grad()
    model.set_requires_gradient_sync(micro_batch % 2 == 1)  # the window's last syncs
    loss = model(torch.randint(0, 10, (5, 3))).pow(2).mean()
    loss.backward()
    local = {n: float(held(p).norm()) for n, p in model.named_parameters()}
    print(f"PASS{rank} {json.dumps(local)}", flush=True)
    if micro_batch % 2:
        opt.step()
whole = {n: float(p.grad.full_tensor().norm()) for n, p in model.named_parameters()}
print(f"WHOLE{rank} {json.dumps(whole)}", flush=True)
if dist.get_world_size() == 1:
    with torch.no_grad():
        model(torch.randint(0, 10, (5, 3)))
    dist.destroy_process_group()
# (on two gloo ranks, a forward and destroy_process_group() here abort plain python now and
# then: "terminate called without an active exception", 1 run in 3 and in 16; the process
# group ends with the process)
