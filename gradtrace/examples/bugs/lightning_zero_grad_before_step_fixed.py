"""The healthy twin of lightning_zero_grad_before_step.py: zero_grad(), manual_backward(),
then step(). Needs lightning. Expected: no warning or error."""

import lightning as L
import torch
from torch.utils.data import DataLoader, TensorDataset


class Regressor(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.automatic_optimization = False
        self.net = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.Tanh(),
                                       torch.nn.Linear(16, 1))

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> None:
        opt = self.optimizers()
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.net(x), y)
        opt.zero_grad()
        self.manual_backward(loss)
        opt.step()
        self.log("train_loss", loss)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.Adam(self.parameters(), lr=0.01)


torch.manual_seed(0)
data = TensorDataset(torch.randn(48, 4), torch.randn(48, 1))
trainer = L.Trainer(max_epochs=2, logger=False, enable_checkpointing=False,
                    enable_progress_bar=False, enable_model_summary=False, accelerator="cpu",
                    devices=1)
trainer.fit(Regressor(), DataLoader(data, batch_size=8))
