"""OpenVINO's ``openvino.tools`` namespace: :mod:`.ovc` (model conversion)."""
