"""Lightning with manual optimization: zero_grad, manual_backward, clip_gradients and
step written in training_step, 2 epochs of 6 batches."""
import lightning as L
import torch
from torch.utils.data import DataLoader, TensorDataset


class Manual(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.automatic_optimization = False
        self.net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(),
                                       torch.nn.Linear(8, 1))

    def training_step(self, batch, batch_idx):
        opt = self.optimizers()
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.net(x), y)
        opt.zero_grad()
        self.manual_backward(loss)
        self.clip_gradients(opt, gradient_clip_val=0.5, gradient_clip_algorithm="norm")
        opt.step()

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=0.01)


torch.manual_seed(0)
data = TensorDataset(torch.randn(24, 4), torch.randn(24, 1))
model = Manual()
trainer = L.Trainer(max_epochs=2, logger=False, enable_checkpointing=False,
                    enable_progress_bar=False, enable_model_summary=False, accelerator="cpu",
                    devices=1)
trainer.fit(model, DataLoader(data, batch_size=4))
print("NORM", float(model.net[0].weight.grad.norm()))
