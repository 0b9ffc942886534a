"""Lowering: ``ai.onnx.ml`` TreeEnsemble (opset 5), every tree walked for every row at once.

The trees are flattened at lowering time into one table of nodes: branch nodes
first (feature, split, mode, missing-value direction, true and false successor),
then the leaves, which point at themselves.  A run starts each (row, tree) at its
root and takes one step down per level for as many levels as the deepest tree
has, all rows and trees together, so the forward pass holds no data-dependent
control flow and can be captured in a CUDA graph.  Comparisons are made in
float64, where every float16/float32 input and split is exact, as the
reference's Python comparisons are.  Set membership (BRANCH_MEMBER) compares
against the node's members, padded with NaN to the largest set.

Leaf weights go to their targets by ``aggregate_function`` (SUM, AVERAGE, MIN,
MAX).  A target no tree's leaf reaches is 0, as ONNX Runtime gives it (ONNX's
reference leaves MIN's and MAX's start there, the type's largest or smallest
value).  Only ``post_transform`` NONE is taken: ONNX's reference implementation
ignores the attribute, so the other transforms have no reference to match.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from inferplex.devices.gpu.ops._common import FLOAT_DTYPES, attrs_reason, dtype_reason, first_reason
from inferplex.devices.gpu.registry import NodeInfo, register

_ML = "ai.onnx.ml"
_ATTRS = ("aggregate_function", "leaf_targetids", "leaf_weights", "membership_values", "n_targets",
          "nodes_falseleafs", "nodes_falsenodeids", "nodes_featureids", "nodes_hitrates",
          "nodes_missing_value_tracks_true", "nodes_modes", "nodes_splits", "nodes_trueleafs",
          "nodes_truenodeids", "post_transform", "tree_roots")
_LEQ, _LT, _GTE, _GT, _EQ, _NEQ, _MEMBER = range(7)
_AVERAGE, _SUM, _MIN, _MAX = range(4)


class _Table:
    """The ensemble's trees as flat arrays (see the module docstring); ``problem`` says why the
    attributes do not make a forest of trees (None: they do)."""

    def __init__(self, info: NodeInfo) -> None:
        def ints(name: str) -> list[int]:
            return [int(v) for v in np.asarray(info.attr(name, [])).reshape(-1)]

        self.modes = ints("nodes_modes")
        branches, leaves = len(self.modes), len(ints("leaf_targetids"))
        self.branches, self.leaves = branches, leaves
        self.features = ints("nodes_featureids")
        self.splits = np.asarray(info.attr("nodes_splits", []), dtype=np.float64).reshape(-1)
        tracks = ints("nodes_missing_value_tracks_true")
        self.missing_true = tracks or [0] * branches
        true_ids, false_ids = ints("nodes_truenodeids"), ints("nodes_falsenodeids")
        true_leafs, false_leafs = ints("nodes_trueleafs"), ints("nodes_falseleafs")
        self.problem = self._check_lengths(true_ids, false_ids, true_leafs, false_leafs)
        if self.problem is not None:
            return
        # Successors in one index space: branch i is i, leaf j is branches + j.
        self.true_next = [t + branches * bool(leaf) for t, leaf in zip(true_ids, true_leafs, strict=True)]
        self.false_next = [f + branches * bool(leaf) for f, leaf in zip(false_ids, false_leafs, strict=True)]
        self.roots = [self._root(r, true_ids, false_ids, true_leafs, false_leafs) for r in ints("tree_roots")]
        self.members = self._members(info)
        self.depth = self._depth() if self.problem is None else 0

    def _check_lengths(self, *lists: list[int]) -> str | None:
        sizes = {len(self.features), len(self.splits), len(self.missing_true), *map(len, lists)}
        if sizes != {self.branches}:
            return "TreeEnsemble's nodes_* attributes differ in length"
        return None

    def _root(self, root: int, true_ids: list[int], false_ids: list[int], true_leafs: list[int],
              false_leafs: list[int]) -> int:
        if not 0 <= root < self.branches:
            return -1  # out of the tables: _depth says so
        # A tree that is one leaf: its root is that leaf's index (ONNX's reference reads it so).
        if true_leafs[root] and false_leafs[root] and true_ids[root] == false_ids[root]:
            return self.branches + root
        return root

    def _members(self, info: NodeInfo) -> np.ndarray:
        """Each branch node's set members (BRANCH_MEMBER nodes, in node order), NaN-padded."""
        values = np.asarray(info.attr("membership_values", []), dtype=np.float64).reshape(-1)
        sets: list[list[float]] = []
        current: list[float] = []
        for v in values:
            if np.isnan(v):
                sets.append(current)
                current = []
            else:
                current.append(float(v))
        owners = [i for i, m in enumerate(self.modes) if m == _MEMBER]
        if len(sets) != len(owners):
            self.problem = (f"TreeEnsemble has {len(owners)} set-membership node(s) and "
                            f"{len(sets)} NaN-ended member set(s)")
        table = np.full((self.branches, max([1, *map(len, sets)])), np.nan)
        for node, members in zip(owners, sets, strict=False):
            table[node, :len(members)] = members
        return table

    def _depth(self) -> int:
        """Levels of the deepest tree; sets ``problem`` for an index out of range or a cycle."""
        total, deepest = self.branches + self.leaves, 0
        for root in self.roots:
            stack = [(root, 0, frozenset[int]())]
            while stack:
                node, depth, path = stack.pop()
                if not 0 <= node < total or node in path:
                    self.problem = "TreeEnsemble's node ids leave the tables or form a cycle"
                    return 0
                if node >= self.branches:
                    deepest = max(deepest, depth)
                    continue
                stack += [(self.true_next[node], depth + 1, path | {node}),
                          (self.false_next[node], depth + 1, path | {node})]
        return deepest


def _tree_ensemble_supports(info: NodeInfo) -> str | None:
    reason = first_reason(attrs_reason(info, _ATTRS), dtype_reason(info, (0,), FLOAT_DTYPES))
    if reason is not None:
        return reason
    if int(info.attr("post_transform", 0)) != 0:
        return "TreeEnsemble post_transform other than NONE (ONNX's reference applies none)"
    if int(info.attr("aggregate_function", _SUM)) not in (_AVERAGE, _SUM, _MIN, _MAX):
        return f"TreeEnsemble aggregate_function {info.attr('aggregate_function')} is unknown"
    if any(m not in range(7) for m in np.asarray(info.attr("nodes_modes", [])).reshape(-1)):
        return "TreeEnsemble has a node mode outside BRANCH_LEQ..BRANCH_MEMBER"
    if info.rank(0) not in (None, 2):
        return f"TreeEnsemble input of rank {info.rank(0)}; it takes [N, features]"
    return _Table(info).problem


def _compare(mode: torch.Tensor, x: torch.Tensor, split: torch.Tensor, members: torch.Tensor) -> torch.Tensor:
    """Each node's test on its feature value ``x`` (float64), by its mode."""
    tests = torch.stack([x <= split, x < split, x >= split, x > split, x == split, x != split,
                         (x.unsqueeze(-1) == members).any(-1)])
    return tests.gather(0, mode.unsqueeze(0)).squeeze(0)


@register("TreeEnsemble", domain=_ML, versions=(5, None), supports=_tree_ensemble_supports)
def _tree_ensemble(info: NodeInfo) -> Callable[..., Any]:
    table = _Table(info)
    pad = [0] * table.leaves  # leaves: any feature, and a successor that is themselves
    leaf_ids = list(range(table.branches, table.branches + table.leaves))
    host = {
        "feature": torch.tensor(table.features + pad, dtype=torch.int64),
        "split": torch.from_numpy(np.concatenate([table.splits, np.zeros(table.leaves)])),
        "mode": torch.tensor(table.modes + pad, dtype=torch.int64),
        "missing": torch.tensor(table.missing_true + pad, dtype=torch.bool),
        "true": torch.tensor(table.true_next + leaf_ids, dtype=torch.int64),
        "false": torch.tensor(table.false_next + leaf_ids, dtype=torch.int64),
        "members": torch.from_numpy(np.concatenate([table.members, np.full((table.leaves,
                                                    table.members.shape[1]), np.nan)])),
        "roots": torch.tensor(table.roots, dtype=torch.int64),
        "weight": torch.from_numpy(np.asarray(info.attr("leaf_weights"), dtype=np.float64).reshape(-1)),
        "target": torch.tensor([int(t) for t in info.attr("leaf_targetids")], dtype=torch.int64),
    }
    on_device: dict[torch.device, dict[str, torch.Tensor]] = {}
    aggregate = int(info.attr("aggregate_function", _SUM))
    targets, trees = int(info.attr("n_targets")), len(table.roots)
    depth, branches = table.depth, table.branches

    def tree_ensemble(x: torch.Tensor) -> torch.Tensor:
        t = on_device.get(x.device)
        if t is None:  # copied once per device, never inside a captured run
            t = on_device[x.device] = {k: v.to(x.device) for k, v in host.items()}
        values = x.to(torch.float64)
        node = t["roots"].expand(x.shape[0], trees)
        for _ in range(depth):
            feature = values.gather(1, t["feature"][node])
            passed = _compare(t["mode"][node], feature, t["split"][node], t["members"][node])
            passed |= t["missing"][node] & feature.isnan()
            node = torch.where(passed, t["true"][node], t["false"][node])
        leaf = node - branches
        weight, target = t["weight"][leaf], t["target"][leaf]
        if aggregate in (_SUM, _AVERAGE):
            out = values.new_zeros((x.shape[0], targets)).scatter_add_(1, target, weight)
            out = out / trees if aggregate == _AVERAGE else out
        else:  # targets no leaf reaches keep their 0
            out = values.new_zeros((x.shape[0], targets)).scatter_reduce_(
                1, target, weight, "amin" if aggregate == _MIN else "amax", include_self=False)
        return out.to(x.dtype)

    return tree_ensemble
