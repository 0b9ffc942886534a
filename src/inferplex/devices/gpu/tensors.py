"""numpy <-> torch conversions that keep memory shared where they can (bfloat16 included)."""

from __future__ import annotations

import numpy as np
import torch

__all__ = ["numpy_to_torch", "torch_to_numpy"]


def numpy_to_torch(array: np.ndarray) -> torch.Tensor:
    """A torch tensor sharing ``array``'s memory (bfloat16 arrays of ml_dtypes included)."""
    array = np.asarray(array)
    if array.dtype.name == "bfloat16":
        return torch.from_numpy(np.ascontiguousarray(array).view(np.uint16)).view(torch.bfloat16)
    if not array.flags.writeable or not array.flags.c_contiguous:
        array = np.array(array, copy=True, order="C")
    return torch.from_numpy(array)


def torch_to_numpy(tensor: torch.Tensor) -> np.ndarray:
    """A host numpy array with ``tensor``'s values (bfloat16 becomes ml_dtypes.bfloat16)."""
    tensor = tensor.detach()
    if tensor.device.type != "cpu":
        tensor = tensor.cpu()
    if tensor.dtype == torch.bfloat16:
        import ml_dtypes

        return tensor.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return tensor.numpy()
