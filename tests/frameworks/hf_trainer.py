"""Hugging Face's Trainer on a tiny random-init BERT (no download): 2 batches accumulated
per step, clipping at 0.5, 3 steps; Trainer logs each step's gradient norm (before
clipping), which the script prints."""
import os
import tempfile

os.environ["HF_HUB_OFFLINE"] = "1"
import torch
from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments


class Pairs(torch.utils.data.Dataset):
    def __init__(self, n):
        g = torch.Generator().manual_seed(1)
        self.ids = torch.randint(0, 100, (n, 8), generator=g)
        self.labels = torch.randint(0, 3, (n,), generator=g)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "labels": self.labels[i]}


torch.manual_seed(0)
config = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                    intermediate_size=64, max_position_embeddings=32, num_labels=3)
model = BertForSequenceClassification(config)
args = TrainingArguments(output_dir=tempfile.mkdtemp(), per_device_train_batch_size=4,
                         gradient_accumulation_steps=2, max_grad_norm=0.5, max_steps=3,
                         logging_steps=1, report_to=[], save_strategy="no", use_cpu=True,
                         disable_tqdm=True, dataloader_num_workers=0, seed=0)
trainer = Trainer(model=model, args=args, train_dataset=Pairs(32))
trainer.train()
print("GRAD_NORMS", [log["grad_norm"] for log in trainer.state.log_history if "grad_norm" in log])
