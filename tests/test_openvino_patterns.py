"""OpenVINO's pattern matching and matcher passes (``inferplex.passes``: Matcher, WrapType, AnyInput,
Or, Optional, the predicates, MatcherPass, GraphRewrite, BackwardGraphRewrite).  Each program is
written once, taking the package, and run on inferplex and on the installed openvino: matches,
pattern value maps, matched nodes and rewritten models (their ops and what they compute) agree.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

import numpy as np
import pytest

import inferplex
import inferplex.passes
import inferplex.utils
from inferplex.errors import InputError, InputTypeError

real = pytest.importorskip("openvino")
import openvino.passes  # noqa: E402 - after the skip
import openvino.utils  # noqa: E402

PACKAGES = {"inferplex": (inferplex, inferplex.passes), "openvino": (real, openvino.passes)}


def _on_both(program: Callable[[ModuleType, Any], Any]) -> Any:
    """The program's answer on inferplex, checked equal to openvino's."""
    answers = {name: program(package, passes) for name, (package, passes) in PACKAGES.items()}
    assert answers["inferplex"] == answers["openvino"]
    return answers["inferplex"]


def _described(matcher: Any, matched: bool) -> tuple[Any, ...]:
    """A match as type names: whether it matched, the pattern value map, the matched nodes."""
    pairs = sorted((key.get_type_name(), value.get_node().get_type_name(), value.get_index())
                   for key, value in matcher.get_pattern_value_map().items())
    return matched, pairs, [node.get_type_name() for node in matcher.get_match_nodes()]


def _chain(package: ModuleType) -> dict[str, Any]:
    """``Relu(Abs(MatMul(Add(p1, p2), p3)))`` and its Result, as the documentation's examples build it."""
    ops = package.opset13
    p1, p2, p3 = (ops.parameter(package.PartialShape([2, 2]), np.float32) for _ in range(3))
    add = ops.add(p1, p2)
    matmul = ops.matmul(add, p3, False, False)
    absolute = ops.abs(matmul)
    relu = ops.relu(absolute)
    model = package.Model([ops.result(relu)], [p1, p2, p3], "chain")
    return {"add": add, "matmul": matmul, "abs": absolute, "relu": relu, "model": model}


def _wrapped_chain(passes: Any) -> Any:
    """The WrapType pattern of :func:`_chain`'s MatMul, Abs and Relu."""
    matmul = passes.WrapType("opset13.MatMul", [passes.AnyInput(), passes.AnyInput()])
    return passes.WrapType("opset13.Relu", passes.WrapType("opset13.Abs", matmul))


PATTERNS: dict[str, Callable[[Any, Any], Any]] = {
    "opset ops on AnyInput": lambda ops, p: ops.relu(ops.abs(ops.matmul(p.AnyInput(), p.AnyInput(),
                                                                           False, False))),
    "WrapType chain": lambda ops, p: _wrapped_chain(p),
    "WrapType of a type list": lambda ops, p: p.WrapType(["opset13.Sigmoid", "opset13::Relu"], p.AnyInput()),
    "Or, second branch": lambda ops, p: p.Or([
        p.WrapType("opset13.Sigmoid", p.WrapType("opset13.Relu", p.AnyInput())), _wrapped_chain(p)]),
    "Or in the middle": lambda ops, p: p.WrapType("opset13.Relu", p.Or([
        p.WrapType("opset13.Sigmoid"), p.WrapType("opset13.Abs", p.AnyInput())])),
    "Optional at the top": lambda ops, p: p.WrapType("opset13.Relu", p.WrapType("opset13.Abs", p.WrapType(
        "opset13.MatMul", [p.Optional(["opset13.Sigmoid"], p.AnyInput()), p.AnyInput()]))),
    "Optional in the middle, absent": lambda ops, p: p.WrapType("opset13.Relu", p.Optional(
        ["opset13.Sigmoid"], p.WrapType("opset13.Abs", p.AnyInput()))),
    "Optional in the middle, present": lambda ops, p: p.WrapType("opset13.Relu", p.Optional(
        ["opset13.Abs"], p.WrapType("opset13.MatMul", [p.AnyInput(), p.AnyInput()]))),
    "Optional at the root": lambda ops, p: p.Optional(["opset13.Sigmoid"], _wrapped_chain(p)),
    "Optional without inputs": lambda ops, p: ops.relu(p.Optional(["opset13.Abs"]).output(0)),
    "Optional of another type": lambda ops, p: p.Optional(["opset13.Abs"]),
    "Add matched in either order": lambda ops, p: p.WrapType("opset13.MatMul", [
        p.WrapType("opset13.Add", [p.WrapType("opset13.Parameter"), p.AnyInput()]), p.AnyInput()]),
    "one AnyInput for both inputs": lambda ops, p: ops.add(*[p.AnyInput()] * 2),
    "wrong input count": lambda ops, p: p.WrapType("opset13.Relu", [p.AnyInput(), p.AnyInput()]),
    "AnyInput predicate": lambda ops, p: p.WrapType("opset13.Relu", p.AnyInput(
        lambda output: len(output.get_shape()) == 2)),
    "AnyInput predicate refusing": lambda ops, p: p.WrapType("opset13.Relu",
                                                             p.AnyInput(lambda output: False)),
    "model node as pattern input": lambda ops, p: p.WrapType("opset13.MatMul", [ops.add(
        ops.parameter([3], np.float32), ops.parameter([3], np.float32)), p.WrapType("opset13.Parameter")]),
}


NOT_MATCHING = {"one AnyInput for both inputs", "wrong input count", "AnyInput predicate refusing"}


@pytest.mark.parametrize("name", list(PATTERNS))
def test_a_pattern_matches_as_in_openvino(name: str) -> None:
    def program(package: ModuleType, passes: Any) -> list[tuple[Any, ...]]:
        built = _chain(package)
        matcher = passes.Matcher(PATTERNS[name](package.opset13, passes), "FindPattern")
        return [_described(matcher, matcher.match(built[node])) for node in ("relu", "abs", "matmul", "add")]

    answers = _on_both(program)
    assert any(matched for matched, _, _ in answers) == (name not in NOT_MATCHING)


def test_wraptype_matches_any_output_and_ops_their_own() -> None:
    def program(package: ModuleType, passes: Any) -> list[tuple[Any, ...]]:
        ops = package.opset13
        halves = ops.split(ops.parameter([6, 2], np.float32), 0, 3)
        relu = ops.relu(halves.output(1))
        matches = []
        for pattern, target in ((passes.WrapType("opset13.Relu", passes.WrapType("opset13.Split")), relu),
                                (passes.WrapType("opset13.Split"), halves.output(2)),
                                (passes.WrapType("opset13.Relu"), halves.output(0))):
            matcher = passes.Matcher(pattern, "Split")
            matches.append(_described(matcher, matcher.match(target)))
        return matches

    assert [matched for matched, _, _ in _on_both(program)] == [True, True, False]


def test_constants_in_a_pattern_match_any_constant() -> None:
    def program(package: ModuleType, passes: Any) -> list[tuple[Any, ...]]:
        ops = package.opset13
        scaled = ops.multiply(ops.parameter([2], np.float32), ops.constant(np.float32([2, 3])))
        patterns = [ops.multiply(passes.AnyInput(), ops.constant(np.float32(7))),
                    passes.WrapType("opset13.Multiply",
                                    [passes.AnyInput(), passes.WrapType("opset13.Constant")])]
        matchers = [passes.Matcher(pattern, "Scale") for pattern in patterns]
        return [_described(matcher, matcher.match(scaled)) for matcher in matchers]

    assert all(matched for matched, _, _ in _on_both(program))


def test_matcher_root_values_and_state() -> None:
    def program(package: ModuleType, passes: Any) -> list[Any]:
        built = _chain(package)
        pattern = _wrapped_chain(passes)
        matcher = passes.Matcher(pattern, "Chain")
        answers: list[Any] = [matcher.get_name(), matcher.match(built["relu"].output(0))]
        answers += [matcher.get_match_root().get_type_name(),
                    matcher.get_match_value().get_node().get_type_name(),
                    [value.get_node().get_type_name() for value in matcher.get_match_values()],
                    matcher.get_pattern_value_map()[pattern].get_node().get_type_name(), pattern in
                    matcher.get_pattern_value_map(), pattern.get_type_name(),
                    passes.AnyInput().get_type_name(),
                    passes.Or([pattern]).get_type_name(), passes.Optional(["opset13.Relu"]).get_type_name()]
        answers += [matcher.match(built["abs"]), matcher.get_match_root(), matcher.get_pattern_value_map(),
                    matcher.get_match_nodes()]
        return answers

    assert _on_both(program)[1]


def _op(model: Any, type_name: str) -> Any:
    """The model's first op of ``type_name``."""
    return next(op for op in model.get_ordered_ops() if op.get_type_name() == type_name)


def _predicate_answers(package: ModuleType, passes: Any) -> list[bool]:
    """Each predicate on the ops of a small model (its Results count as consumers)."""
    ops = package.opset13
    static = ops.parameter(package.PartialShape([1, 3, 22, 22]), np.float32)
    partial = ops.parameter(package.PartialShape([-1, 6]), np.int64)
    unranked = ops.parameter(package.PartialShape.dynamic(), np.float32)
    shared = ops.relu(static)
    model = package.Model([ops.result(shared), ops.result(ops.abs(shared)), ops.result(ops.negative(partial)),
                           ops.result(ops.exp(unranked))], [static, partial, unranked], "predicates")
    checks = [passes.consumers_count(2), passes.consumers_count(1), passes.has_static_dim(1),
              passes.has_static_dim(0), passes.has_static_dims([0, 3]), passes.has_static_dims([1]),
              passes.has_static_shape(), passes.has_static_rank(), passes.rank_equals(package.Dimension(2)),
              passes.rank_equals(package.Dimension(4)), passes.type_matches(package.Type.f32),
              passes.type_matches_any([package.Type.i64, package.Type.i32]),
              passes.Predicate(lambda output: output.get_partial_shape().rank.is_static), passes.Predicate()]
    nodes = [_op(model, "Relu"), *model.get_parameters()]
    return [passes.Matcher(passes.AnyInput(check), "Check").match(node) for check in checks for node in nodes]


def test_predicates_answer_as_in_openvino() -> None:
    answers = _on_both(_predicate_answers)
    assert True in answers and False in answers


def test_predicates_on_wraptype_and_optional() -> None:
    def program(package: ModuleType, passes: Any) -> list[bool]:
        ops = package.opset13
        data = ops.parameter(package.PartialShape.dynamic(), np.float32)
        add = ops.add(data, data)
        relu, absolute = ops.relu(add), ops.abs(add)
        model = package.Model([ops.result(relu), ops.result(absolute)], [data], "optional")
        cases = [lambda: passes.Optional(["opset13.Relu"], lambda output: True),
                 lambda: passes.Optional(["opset13.Relu"], lambda output: False),
                 lambda: passes.Optional(["opset13.Add"], passes.consumers_count(2)),
                 lambda: passes.Optional(["opset13.Add"], passes.consumers_count(1)),
                 lambda: passes.Optional(["opset13.Relu"], add.output(0)),
                 lambda: passes.Optional(["opset13.Cos"], add),
                 lambda: passes.Optional(["opset13.Relu"], ops.add(passes.AnyInput(), passes.AnyInput()),
                                         lambda output: False),
                 lambda: passes.WrapType("opset13.Parameter", passes.has_static_rank()),
                 lambda: passes.WrapType(["opset13.Relu", "opset13.PRelu"],
                                         passes.WrapType("opset13.Add").output(0), passes.consumers_count(1))]
        relu, add, data = (_op(model, kind) for kind in ("Relu", "Add", "Parameter"))  # the model's own
        targets = [relu, relu, add, add, relu, relu, relu, data, relu]
        # one at a time: in openvino, a pattern made on a graph's output is one more consumer of it
        answers = [passes.Matcher(case(), "Optional").match(node)
                   for case, node in zip(cases, targets, strict=True)]
        return answers if model.get_parameters() else []

    assert _on_both(program) == [True, False, True, False, True, False, False, False, True]


def test_shape_matches_binds_symbols() -> None:
    def program(package: ModuleType, passes: Any) -> list[Any]:
        answers = []
        for shape, pattern in (([1, 3, 22, 22], "[Batch,Channels,Spatial,Spatial]"), ([2, 3], "[A,A]"),
                               ([2, 3, 4, 5], "[N,Rest...]"), ([2, 3, 4], "[...,4]"), ([-1, 3], "[?,3]"),
                               ([-1, 3], "[A,B]"), ([2, 3], "[2,3,4]")):
            matcher = passes.Matcher(passes.AnyInput(passes.shape_matches(pattern)), "Shape")
            node = package.opset13.parameter(package.PartialShape(shape), np.float32)
            answers.append((matcher.match(node), matcher.get_symbols()))
        return answers

    assert _on_both(program)[0] == (True, {"Batch": 1, "Channels": 3, "Spatial": 22})


# --- matcher passes ------------------------------------------------------------------------------


def _rewritten(package: ModuleType, passes: Any, model: Any, *registered: Any) -> dict[str, Any]:
    """Run the passes on ``model``; its ops' type names (in order) and what it computes afterwards."""
    manager = passes.Manager()
    for each in registered:
        assert manager.register_pass(each) is each
    manager.run_passes(model)
    data = {port.get_any_name(): np.linspace(-2, 2, int(np.prod(port.get_shape())), dtype=np.float32)
            .reshape(tuple(port.get_shape())) for port in model.inputs}
    results = package.Core().compile_model(model, "CPU")(data)
    return {"ops": [op.get_type_name() for op in model.get_ordered_ops()],
            "values": [np.round(np.asarray(results[i]), 5).tolist() for i in range(len(model.outputs))]}


def _relu_model(package: ModuleType) -> Any:
    """Parameter -> Multiply by a constant -> Relu -> Result."""
    ops = package.opset13
    data = ops.parameter([2, 3], np.float32, name="data")
    scaled = ops.multiply(data, ops.constant(np.float32(1.5)))
    return package.Model([ops.result(ops.relu(scaled))], [data], "relu_model")


def _doubling_relu(package: ModuleType, passes: Any, log: list[str] | None = None) -> Any:
    """The documentation's pass: a second Relu after each Relu."""
    def callback(matcher: Any) -> bool:
        root = matcher.get_match_root()
        root.input(0).replace_source_output(package.opset13.relu(root.input(0).get_source_output()).output(0))
        if log is not None:
            log.append("double")
        return True

    return passes.MatcherPass(passes.Matcher(passes.WrapType("opset13::Relu"), "DoubleRelu"), callback)


def test_matcher_pass_inserts_an_op() -> None:
    answer = _on_both(lambda package, passes: _rewritten(
        package, passes, _relu_model(package), _doubling_relu(package, passes)))
    assert answer["ops"] == ["Parameter", "Constant", "Multiply", "Relu", "Relu", "Result"]


class _ReluToExp:
    """A MatcherPass subclass (as the documentation writes them) replacing each Relu by an Exp."""

    @staticmethod
    def made(package: ModuleType, passes: Any) -> Any:
        class ReluToExp(passes.MatcherPass):  # type: ignore[name-defined, misc]
            def __init__(self) -> None:
                passes.MatcherPass.__init__(self)
                relu = passes.WrapType("opset13.Relu", passes.AnyInput())

                def callback(matcher: Any) -> bool:
                    root = matcher.get_match_root()
                    assert relu in matcher.get_pattern_value_map()
                    package.utils.replace_node(root, package.opset13.exp(root.input_value(0)))
                    return True

                self.register_matcher(passes.Matcher(relu, "ReluToExp"), callback)

        return ReluToExp()


def test_matcher_pass_replaces_an_op() -> None:
    def program(package: ModuleType, passes: Any) -> Any:
        rewrite = _ReluToExp.made(package, passes)
        return rewrite.get_name(), _rewritten(package, passes, _relu_model(package), rewrite)

    name, answer = _on_both(program)
    assert name == "ReluToExp" and answer["ops"] == ["Parameter", "Constant", "Multiply", "Exp", "Result"]


def test_a_callback_returning_false_changes_nothing() -> None:
    def program(package: ModuleType, passes: Any) -> Any:
        seen: list[str] = []

        def callback(matcher: Any) -> bool:
            seen.append(matcher.get_match_root().get_type_name())
            return False

        rewrite = passes.MatcherPass(passes.Matcher(passes.WrapType(["opset13.Relu", "opset13.Multiply"]),
                                                    "Look"), callback)
        return seen, _rewritten(package, passes, _relu_model(package), rewrite)

    seen, answer = _on_both(program)
    assert seen == ["Multiply", "Relu"] and answer["ops"].count("Relu") == 1


def test_apply_runs_a_matcher_pass_on_one_node() -> None:
    def program(package: ModuleType, passes: Any) -> Any:
        model, log = _relu_model(package), []
        rewrite = _doubling_relu(package, passes, log)
        applied = [rewrite.apply(model.get_result().input_value(0).get_node()),
                   rewrite.apply(model.get_parameters()[0])]
        return applied, log, [op.get_type_name() for op in model.get_ordered_ops()]

    assert _on_both(program)[0] == [True, False]


def test_graph_rewrite_tries_its_matchers_in_order() -> None:
    def program(package: ModuleType, passes: Any) -> Any:
        log: list[str] = []

        def replacing(kind: str, by: str) -> Any:
            def callback(matcher: Any) -> bool:
                root = matcher.get_match_root()
                log.append(f"{kind}:{root.get_type_name()}")
                package.utils.replace_node(root, getattr(package.opset13, by)(root.input_value(0)))
                return True
            return passes.MatcherPass(passes.Matcher(passes.WrapType(f"opset13.{kind}"), kind), callback)

        rewrite = passes.GraphRewrite()
        assert rewrite.add_matcher(replacing("Relu", "sigmoid")) is not None
        rewrite.add_matcher(replacing("Relu", "exp"))  # the first pass rewrote each Relu already
        ops = package.opset13
        data = ops.parameter([2, 3], np.float32, name="data")
        model = package.Model([ops.result(ops.abs(ops.relu(ops.relu(data))))], [data], "two")
        return log, _rewritten(package, passes, model, rewrite)

    log, answer = _on_both(program)
    assert log == ["Relu:Relu", "Relu:Relu"] and answer["ops"].count("Sigmoid") == 2


def test_graph_rewrite_with_two_matchers_and_new_nodes() -> None:
    def program(package: ModuleType, passes: Any) -> Any:
        ops, log = package.opset13, []

        def insert_exp(matcher: Any) -> bool:
            root = matcher.get_match_value()
            consumers = root.get_target_inputs()
            exp = ops.exp(root)
            for consumer in consumers:
                consumer.replace_source_output(exp.output(0))
            inserting.register_new_node(exp)
            log.append("insert")
            return False

        def remove_exp(matcher: Any) -> bool:
            root = matcher.get_match_root()
            root.output(0).replace(root.input_value(0))
            log.append("remove")
            return True

        inserting = passes.MatcherPass(passes.Matcher(passes.WrapType("opset13.Parameter"), "InsertExp"),
                                       insert_exp)
        rewrite = passes.GraphRewrite()
        rewrite.add_matcher(inserting)
        rewrite.add_matcher(passes.MatcherPass(passes.Matcher(passes.WrapType("opset13.Exp"), "RemoveExp"),
                                               remove_exp))
        return log, _rewritten(package, passes, _relu_model(package), rewrite)

    log, answer = _on_both(program)
    assert log == ["insert", "remove"] and "Exp" not in answer["ops"]


@pytest.mark.parametrize("backward", [False, True])
def test_graph_rewrites_visit_ops_forward_or_backward(backward: bool) -> None:
    def program(package: ModuleType, passes: Any) -> list[str]:
        seen: list[str] = []

        def callback(matcher: Any) -> bool:
            seen.append(matcher.get_match_root().get_type_name())
            return False

        rewrite = passes.BackwardGraphRewrite() if backward else passes.GraphRewrite()
        rewrite.add_matcher(passes.MatcherPass(passes.Matcher(passes.AnyInput(), "Every"), callback))
        manager = passes.Manager()
        manager.register_pass(rewrite)
        manager.run_passes(_relu_model(package))
        return seen

    order = ["Parameter", "Constant", "Multiply", "Relu", "Result"]
    assert _on_both(program) == (order[::-1] if backward else order)


def test_backward_rewrite_sees_the_ops_it_made() -> None:
    def program(package: ModuleType, passes: Any) -> Any:
        seen: list[str] = []

        def callback(matcher: Any) -> bool:
            root = matcher.get_match_root()
            seen.append(root.get_type_name())
            if root.get_type_name() != "Relu":
                return False
            package.utils.replace_node(root, package.opset13.sigmoid(root.input_value(0)))
            return True

        rewrite = passes.BackwardGraphRewrite()
        rewrite.add_matcher(passes.MatcherPass(passes.Matcher(passes.AnyInput(), "Every"), callback))
        return seen, _rewritten(package, passes, _relu_model(package), rewrite)

    seen, answer = _on_both(program)
    assert "Sigmoid" in answer["ops"] and seen[:2] == ["Result", "Relu"]


def test_optional_and_or_patterns_in_a_rewrite() -> None:
    def program(package: ModuleType, passes: Any) -> Any:
        ops = package.opset13
        data = ops.parameter([2, 3], np.float32, name="data")
        model = package.Model([ops.result(ops.relu(ops.abs(data))), ops.result(ops.relu(data))], [data],
                              "opt")
        absolute = passes.Optional(["opset13.Abs"], passes.WrapType("opset13.Parameter"))
        relu = passes.WrapType("opset13.Relu", absolute)
        found: list[Any] = []

        def callback(matcher: Any) -> bool:
            values = matcher.get_pattern_value_map()
            found.append((absolute in values, values[relu].get_node().get_type_name()))
            root = matcher.get_match_root()
            package.utils.replace_node(root, ops.negative(root.input_value(0)))
            return True

        rewritten = _rewritten(package, passes, model, passes.MatcherPass(passes.Matcher(
            passes.Or([relu, passes.WrapType("opset13.Sigmoid")]), "NegateRelu"), callback))
        return sorted(found), rewritten["values"], sorted(rewritten["ops"])

    found, _, ops = _on_both(program)
    assert found == [(False, "Relu"), (True, "Relu")] and "Relu" not in ops


# --- bad input ------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["", "Parameter", "opset.Parameter", "ops,Parameter", "opset99.Relu"])
def test_wraptype_refuses_names_without_an_opset(name: str) -> None:
    with pytest.raises(InputError, match=r"Unsupported opset type.*accepted: 'opsetN\.Type'"):
        inferplex.passes.WrapType(name)
    with pytest.raises(RuntimeError, match="Unsupported opset type"):
        openvino.passes.WrapType(name)


def test_wraptype_refuses_unknown_op_types() -> None:
    with pytest.raises(InputError, match="Unrecognized operation type: 'Foo'"):
        inferplex.passes.WrapType(["opset13.Relu", "opset13.Foo"])
    with pytest.raises(InputTypeError, match=r"op type name such as 'opset13\.MatMul'"):
        inferplex.passes.WrapType(5)  # type: ignore[arg-type]


def test_bad_patterns_matchers_and_callbacks_are_named() -> None:
    passes = inferplex.passes
    with pytest.raises(InputTypeError, match="Matcher takes patterns as nodes or their outputs"):
        passes.Matcher("Relu", "Name")
    with pytest.raises(InputTypeError, match="Or takes a list of patterns"):
        passes.Or(passes.AnyInput())  # type: ignore[arg-type]
    with pytest.raises(InputTypeError, match="register_matcher takes a Matcher"):
        passes.MatcherPass().register_matcher("Relu", lambda m: True)  # type: ignore[arg-type]
    with pytest.raises(InputTypeError, match="add_matcher takes a MatcherPass"):
        passes.GraphRewrite().add_matcher(passes.Manager())  # type: ignore[arg-type]
    with pytest.raises(InputTypeError, match="has_static_dim takes a non-negative int"):
        passes.has_static_dim(-1)
    with pytest.raises(InputError, match="shape_matches takes a pattern in brackets"):
        passes.shape_matches("N,C")
    ops = inferplex.opset13
    with pytest.raises(InputTypeError, match="predicate must return a bool"):
        passes.Matcher(passes.AnyInput(lambda output: "yes"), "Text").match(ops.parameter([2], np.float32))
    data = ops.parameter([2], np.float32)
    model = inferplex.Model([ops.result(ops.relu(data))], [data], "m")
    rewrite = passes.MatcherPass(passes.Matcher(passes.WrapType("opset13.Relu"), "NoVerdict"), lambda m: None)
    with pytest.raises(InputTypeError, match="callback must return a bool"):
        rewrite.run_on_model(model)
