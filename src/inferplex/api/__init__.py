"""The OpenVINO-facing layer: the public types of ``import inferplex as ov`` (Type, shapes, Layout,
Tensor), reshape and batch, model-building nodes, conversion and saving."""
