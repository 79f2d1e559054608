"""The example's models: a small CNN for the 8x8 digits (default) and an MLP."""

import torch
from torch import nn


def make(name, seed):
    torch.manual_seed(seed)
    if name == "cnn":
        return nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(),
            nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(), nn.Linear(32 * 4 * 4, 64), nn.ReLU(), nn.Linear(64, 10))
    if name == "mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
    raise ValueError(f"unknown model {name!r} (cnn, mlp)")


@torch.no_grad()
def accuracy(model, data):
    model.eval()
    predicted = model(data.images).argmax(dim=1)
    model.train()
    return float((predicted == data.labels).float().mean())
