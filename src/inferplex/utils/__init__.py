"""Helpers OpenVINO programs import from ``openvino.utils`` (``types.get_dtype``, ``data_helpers.OVDict``)."""
