"""``torch.nn.parallel``: ``DataParallel`` (runs the module as is: torchlight uses one device, as
PyTorch's does without GPUs) and ``DistributedDataParallel`` (needs a process group, which
torchlight does not have: it raises, naming it)."""

from __future__ import annotations

from typing import Any

from torchlight.nn.module import Module

__all__ = ["DataParallel", "DistributedDataParallel"]


class DataParallel(Module):
    """Wrap ``module``; ``forward`` calls it (one device: nothing to scatter, as PyTorch on CPU).

    Its ``state_dict`` keys start with ``module.``, as PyTorch's.
    """

    def __init__(
        self, module: Module, device_ids: Any = None, output_device: Any = None, dim: int = 0
    ) -> None:
        super().__init__()
        if device_ids not in (None, [], [0]) or output_device not in (None, 0):
            raise ValueError(
                f"DataParallel(device_ids={device_ids!r}, output_device={output_device!r}): torchlight "
                "runs on one device; give no device_ids (or [0])"
            )
        self.module, self.dim = module, dim

    def forward(self, *inputs: Any, **kwargs: Any) -> Any:
        return self.module(*inputs, **kwargs)


class DistributedDataParallel(Module):
    """Raises: DistributedDataParallel needs ``torch.distributed``'s process group."""

    def __init__(self, module: Module, *args: Any, **kwargs: Any) -> None:
        raise ValueError(
            "DistributedDataParallel: Default process group has not been initialized, please make sure "
            "to call init_process_group (torchlight has no distributed training: use the module itself)"
        )
