"""Stateful models: OpenVINO's variables, ``ReadValue`` and ``Assign``, and the state of requests.

A variable holds a tensor that lives from one inference of a request to the next: ``ReadValue``
reads it (on the first inference, or after a reset, its initial value: the ``ReadValue``'s input
where it has one, else zeros), ``Assign`` gives it the value it holds for the next inference.

* :mod:`.variables`: ``VariableInfo`` and ``Variable`` (``ov.op.util``) and how a model's graph
  holds them: ``ReadValue`` and ``Assign`` are nodes of the ``STATE_DOMAIN`` ONNX domain, whose
  attributes name the variable, so a saved model keeps its state;
* :mod:`.ops`: the opset functions ``read_value`` and ``assign``;
* :mod:`.model_state`: a Model's sinks and variables (``get_sinks``, ``add_variables``, ...);
* :mod:`.stateless`: what the devices run, a copy of the graph where each variable is one more
  input (and, where an ``Assign`` writes it, one more output), and the plan that names them;
* :mod:`.request_state`: each request's variables (``query_state``, ``reset_state``,
  ``VariableState``), fed to and read from those inputs and outputs on every inference.
"""
