"""The building blocks of :mod:`inferplex.opset` (and ``opset1``, ``opset8``): OpenVINO's opset
functions, each translated into ONNX nodes, grouped by kind (``build``: making nodes and constants;
``more``: element-wise ops, splits, reductions; ``math``; ``shapes``; ``slicing``; ``index``:
gathers and scatters; ``nn``: normalizations, grouped convolutions, attention; ``interpolate``)."""
