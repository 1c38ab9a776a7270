"""A tiny GPT-2 (Hugging Face transformers, random init, no download) trained with
accelerate, 4 micro-batches a step, but optimizer.zero_grad() at the top of every micro-batch
(line 28): 3 of every 4 micro-batches are thrown away. Needs transformers and accelerate.
Expected: grad-discarded at line 28. The healthy twin is hf_gpt2_accumulation_fixed.py."""

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
accelerator = Accelerator(cpu=True)
model, optimizer = accelerator.prepare(model, optimizer)
accumulation_steps = 4
tokens = torch.randint(0, 64, (16, 4, 16))  # 16 micro-batches of 4 sequences

model.train()
for i, batch in enumerate(tokens):
    outputs = model(input_ids=batch, labels=batch)
    loss = outputs.loss / accumulation_steps
    # a fresh gradient for each batch
    optimizer.zero_grad()
    accelerator.backward(loss)
    if (i + 1) % accumulation_steps == 0:
        optimizer.step()
print(f"loss {loss.item() * accumulation_steps:.4f}")
