"""Lightning's Trainer.fit, as its docs write it: automatic optimization, 2 batches
accumulated per step, gradient clipping, a callback."""
import lightning as L
import torch
from torch.utils.data import DataLoader, TensorDataset


class Regressor(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(),
                                       torch.nn.Linear(8, 1))

    def training_step(self, batch, batch_idx):
        x, y = batch
        return torch.nn.functional.mse_loss(self.net(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


class CountBatches(L.Callback):
    def __init__(self):
        self.batches = 0

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        self.batches += 1


torch.manual_seed(0)
data = TensorDataset(torch.randn(32, 4), torch.randn(32, 1))
model = Regressor()
count = CountBatches()
trainer = L.Trainer(max_epochs=1, accumulate_grad_batches=2, gradient_clip_val=0.5,
                    callbacks=[count], logger=False, enable_checkpointing=False,
                    enable_progress_bar=False, enable_model_summary=False, accelerator="cpu",
                    devices=1)
trainer.fit(model, DataLoader(data, batch_size=4))
print("BATCHES", count.batches)
print("NORM", float(model.net[0].weight.grad.norm()))
