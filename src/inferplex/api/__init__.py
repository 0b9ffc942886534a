"""The OpenVINO-facing layer: shapes and reshape, batch, model-building nodes, saving."""
