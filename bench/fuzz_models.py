"""Counts of what malformed model files end as: read fine, refused (by error class), or escaped.

The mutants are those of ``tests/model_mutants.py``, deterministic for a seed:
byte-level mutants of the onnx wheel's light models and of a built model, read
from bytes; and field-level mutants of the built model, read, then compiled on
CPU and run once with zero inputs when they read fine.  "escaped" counts errors
that are not ``inferplex.errors`` (the tests require none).

    python bench/fuzz_models.py [--bytes 3000] [--fields 400] [--seed 0]
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

import inferplex as ov
from inferplex.errors import InferplexError

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from model_mutants import field_mutants, mutants


def _outcome(action: Any) -> tuple[str, Any]:
    try:
        return "ok", action()
    except InferplexError as error:
        return f"refused {type(error).__name__}", error
    except Exception as error:  # noqa: BLE001 - what is counted
        return f"escaped {type(error).__module__}.{type(error).__name__}", error


def _compile_and_run(core: ov.Core, model: ov.Model) -> None:
    compiled = core.compile_model(model, "CPU")
    ports = model.inputs
    if all(p.is_tensor and not p.is_dynamic and p.element_type is not None for p in ports) and all(
            np.prod(p.shape, dtype=np.float64) <= 1 << 22 for p in ports):
        compiled({p.any_name: np.zeros(p.shape, p.element_type.to_dtype()) for p in ports})  # type: ignore[union-attr]


def _print(title: str, counts: Counter[str]) -> None:
    print(f"{title}: {sum(counts.values())}")
    for key, count in sorted(counts.items()):
        print(f"  {key:<40} {count}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bytes", type=int, default=3000, help="byte-level mutants read")
    parser.add_argument("--fields", type=int, default=400, help="field-level mutants read and compiled")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    core = ov.Core()
    reads: Counter[str] = Counter()
    by_seed: Counter[str] = Counter()
    for mutant in mutants(args.bytes, seed=args.seed):
        kind, _ = _outcome(lambda m=mutant: core.read_model(m.data))
        reads[kind] += 1
        by_seed[f"{mutant.seed} {'read' if kind == 'ok' else 'not read'}"] += 1
    _print("byte-level mutants read", reads)
    _print("byte-level mutants by seed", by_seed)
    field_reads: Counter[str] = Counter()
    compiles: Counter[str] = Counter()
    for mutant in field_mutants(args.fields, seed=args.seed):
        kind, model = _outcome(lambda m=mutant: core.read_model(m.data))
        field_reads[kind] += 1
        if kind == "ok":
            compiles[_outcome(lambda model=model: _compile_and_run(core, model))[0]] += 1
    _print("field-level mutants read", field_reads)
    _print("field-level mutants that read, compiled on CPU and run", compiles)


if __name__ == "__main__":
    main()
