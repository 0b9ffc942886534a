"""Where each op of a model runs: HETERO's affinities and subgraphs, PIPELINE_PARALLEL's stages.

Planning only: nothing here compiles or runs a model (``inferplex.hetero`` compiles
a plan into a chain of device programs; ``inferplex.engine.chain`` runs it).

- ``graph``: the model's ops in order, with the values each reads and writes;
- ``affinity``: op -> device from each device's support, manual affinities and fallback;
- ``pipeline``: stages by memory (the memory model of PIPELINE_PARALLEL);
- ``split``: a plan's subgraphs as ONNX models of their own;
- ``plan`` / ``planner``: the plan a compilation follows, and how it is made;
- ``cost``: HETERO_PLACEMENT=COST's choice between the support split and the whole
  model on one device, from measured numbers (``inferplex.hetero`` measures);
- ``visualize``: GraphViz files of a placement.
"""
