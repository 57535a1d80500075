"""Small helpers every chapter uses."""

from __future__ import annotations

import random

import torch


def get_device(verbose: bool = False) -> torch.device:
    """Return the best available device: ``cuda``, else ``mps`` (Apple), else ``cpu``.

    With ``verbose=True`` also prints which one was picked and why, so a reader in Colab
    can see whether the GPU runtime is active.
    """
    if torch.cuda.is_available():
        device = torch.device("cuda")
        reason = f"GPU: {torch.cuda.get_device_name(0)}"
    elif getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        device = torch.device("mps")
        reason = "Apple-silicon GPU (Metal)"
    else:
        device = torch.device("cpu")
        reason = "no GPU found; in Colab choose Runtime > Change runtime type > GPU to use one"
    if verbose:
        print(f"Using device: {device} ({reason})")
    return device


def set_seed(seed: int) -> None:
    """Seed Python's and PyTorch's random number generators (all devices)."""
    random.seed(seed)
    torch.manual_seed(seed)
