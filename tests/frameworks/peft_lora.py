"""PEFT LoRA on a tiny random-init GPT-2 (no download): the base weights are frozen, the
adapters train, with clipping."""
import os

os.environ["HF_HUB_OFFLINE"] = "1"
import torch
from peft import LoraConfig, get_peft_model
from transformers import GPT2Config, GPT2LMHeadModel

torch.manual_seed(0)
base = GPT2LMHeadModel(GPT2Config(vocab_size=100, n_positions=32, n_embd=32, n_layer=2, n_head=2))
model = get_peft_model(base, LoraConfig(r=4, lora_alpha=8, target_modules=["c_attn"],
                                        fan_in_fan_out=True, lora_dropout=0.0))
opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3)
ids = torch.randint(0, 100, (2, 16))
for _step in range(3):
    opt.zero_grad()
    loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
lora_b = model.base_model.model.transformer.h[0].attn.c_attn.lora_B["default"].weight
print("NORM", float(lora_b.grad.norm()))
