"""The healthy twin of hf_gpt2_accumulation.py: accelerate does the accumulation
(Accelerator(gradient_accumulation_steps=4) and `with accelerator.accumulate(model):`): step()
and zero_grad() run only after the 4th micro-batch. Needs transformers and accelerate.
Expected: no warning or error."""

import os

os.environ["HF_HUB_OFFLINE"] = "1"
import torch
from accelerate import Accelerator
from transformers import GPT2Config, GPT2LMHeadModel

torch.manual_seed(0)
config = GPT2Config(vocab_size=64, n_positions=32, n_embd=32, n_layer=2, n_head=2,
                    bos_token_id=0, eos_token_id=0)
model = GPT2LMHeadModel(config)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
accelerator = Accelerator(cpu=True, gradient_accumulation_steps=4)
model, optimizer = accelerator.prepare(model, optimizer)
tokens = torch.randint(0, 64, (16, 4, 16))  # 16 micro-batches of 4 sequences

model.train()
for batch in tokens:
    with accelerator.accumulate(model):
        outputs = model(input_ids=batch, labels=batch)
        loss = outputs.loss
        accelerator.backward(loss)
        optimizer.step()
        optimizer.zero_grad()
print(f"loss {loss.item():.4f}")
