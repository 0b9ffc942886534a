"""The OpenVINO-facing layer: the public types of ``import inferplex as ov``."""
