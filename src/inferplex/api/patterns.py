"""OpenVINO's graph patterns over inferplex's nodes: pattern ops, predicates and the :class:`Matcher`.

A pattern is a small graph whose leaves say what may stand there: :class:`AnyInput` (any output,
optionally one a predicate accepts), :class:`WrapType` (an op of one of the given types, with these
inputs), :class:`Or` (any of several patterns), :class:`Optional` (an op of the given types that
may be absent), and ordinary ops built with ``inferplex.opset`` on those (``ops.relu(AnyInput())``)::

    pattern = WrapType("opset13.Relu", WrapType("opset13.MatMul", [AnyInput(), AnyInput()]))
    matcher = Matcher(pattern, "FindMatMulRelu")
    if matcher.match(node):
        matmul = matcher.get_pattern_value_map()[pattern].get_node().input_value(0).get_node()

Matching follows OpenVINO's (``ov::pass::pattern::Matcher``): an ordinary op matches an op of the
same type name on the same output index whose inputs match its inputs; WrapType matches by type
name on any output; the inputs of Add, Multiply, Maximum, Minimum, Equal, NotEqual and the logical
binary ops match in either order; an AnyInput used twice must match the same output twice.
Pattern values have no element type or shape, so opset functions build ops on them without
inferring types (``inferplex._opsets.build.PATTERN_KEY``).
"""

from __future__ import annotations

import inspect
import itertools
import re
from collections.abc import Callable, Sequence
from typing import Any

import onnx_ir as ir

from inferplex._opsets.build import PATTERN_KEY
from inferplex._ports import Port, source_node
from inferplex.api.nodes import Node
from inferplex.api.types import Type
from inferplex.errors import InputError, InputTypeError

__all__ = [
    "AnyInput", "Matcher", "Optional", "Or", "PatternOp", "Predicate", "WrapType", "consumers_count",
    "has_static_dim", "has_static_dims", "has_static_rank", "has_static_shape", "rank_equals",
    "shape_matches", "type_matches", "type_matches_any",
]

_NODE_KEY = "inferplex.pattern_node"
"""onnx-ir value ``meta`` key: the pattern op whose output the value is."""

_LAST_OPSET = 17
"""The highest ``opsetN`` WrapType names take, as OpenVINO 2026's."""

_COMMUTATIVE = frozenset({"Add", "Multiply", "Maximum", "Minimum", "Equal", "NotEqual", "LogicalAnd",
                          "LogicalOr", "LogicalXor", "Xor"})
"""Ops whose inputs a pattern matches in any order (OpenVINO's ``is_commutative``)."""

Symbols = dict[str, Any]
"""What :func:`shape_matches` bound: a name to a dim (int or symbol) or to a list of dims."""

PatternOutput = tuple[Node, int]
"""One output of a pattern: the pattern node and the output's index."""


# --- predicates --------------------------------------------------------------------------------


class Predicate:
    """A check on a graph output (OpenVINO's ``pass.Predicate``): ``Predicate(fn)`` with
    ``fn(output) -> bool`` or ``fn(symbols, output) -> bool``; ``Predicate()`` accepts any."""

    def __init__(self, predicate: Callable[..., Any] | None = None) -> None:
        if predicate is not None and not callable(predicate):
            raise InputTypeError(f"Predicate takes a function (output) -> bool or (symbols, output) -> bool, "
                                 f"got {type(predicate).__name__}")
        self._function = predicate
        self._with_symbols = predicate is not None and _positional_count(predicate) >= 2

    def __call__(self, symbols: Symbols, output: Port) -> bool:
        """Whether ``output`` passes; ``symbols`` are the matcher's bound shape names."""
        if self._function is None:
            return True
        verdict = self._function(symbols, output) if self._with_symbols else self._function(output)
        if not isinstance(verdict, bool) and type(verdict).__name__ != "bool_":
            raise InputTypeError(f"a pattern predicate must return a bool, got {type(verdict).__name__} "
                                 f"({verdict!r})")
        return bool(verdict)


def _positional_count(function: Callable[..., Any]) -> int:
    """How many positional arguments ``function`` takes (1 where its signature is unknown)."""
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return 1
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return sum(1 for p in parameters if p.kind in kinds)


def _as_predicate(predicate: Any) -> Predicate:
    """A :class:`Predicate` from one, a function, or None (accept any)."""
    if isinstance(predicate, Predicate):
        return predicate
    return Predicate(predicate)


def _rank(output: Port) -> int | None:
    dims = output.dims
    return None if dims is None else len(dims)


def consumers_count(count: int) -> Predicate:
    """The output feeds exactly ``count`` inputs (of ops and of the model's Results)."""
    expected = _count_argument(count, "consumers_count")
    return Predicate(lambda output: len(output.get_target_inputs()) == expected)


def has_static_dim(position: int) -> Predicate:
    """The output's rank is known and its dim ``position`` is static."""
    index = _count_argument(position, "has_static_dim")
    return Predicate(lambda output: _static_at(output, [index]))


def has_static_dims(positions: Sequence[int]) -> Predicate:
    """The output's rank is known and each of its dims at ``positions`` is static."""
    indices = [_count_argument(p, "has_static_dims") for p in positions]
    return Predicate(lambda output: _static_at(output, indices))


def _static_at(output: Port, indices: Sequence[int]) -> bool:
    dims = output.dims
    return dims is not None and all(i < len(dims) and isinstance(dims[i], int) for i in indices)


def has_static_shape() -> Predicate:
    """Every dim of the output is static."""
    return Predicate(lambda output: not output.is_dynamic)


def has_static_rank() -> Predicate:
    """The output's rank is known."""
    return Predicate(lambda output: output.dims is not None)


def rank_equals(rank: Any) -> Predicate:
    """The output's rank is ``rank`` (an int or a Dimension; a dynamic Dimension: an unknown rank)."""
    expected = _rank_argument(rank)
    return Predicate(lambda output: _rank(output) == expected)


def _rank_argument(rank: Any) -> int | None:
    if isinstance(rank, int) and not isinstance(rank, bool):
        return rank
    if callable(getattr(rank, "is_static", None)) or hasattr(rank, "is_static"):
        static = rank.is_static() if callable(rank.is_static) else rank.is_static
        return int(rank.get_length()) if static else None
    raise InputTypeError(f"rank_equals takes a Dimension or an int, got {type(rank).__name__}")


def _count_argument(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InputTypeError(f"{what} takes a non-negative int, got {value!r}")
    return value


def type_matches(element_type: Any) -> Predicate:
    """The output's element type is ``element_type`` (an ``ov.Type``)."""
    expected = Type(element_type)
    return Predicate(lambda output: output.get_element_type() == expected)


def type_matches_any(element_types: Sequence[Any]) -> Predicate:
    """The output's element type is one of ``element_types``."""
    expected = [Type(t) for t in element_types]
    return Predicate(lambda output: output.get_element_type() in expected)


def shape_matches(pattern: str) -> Predicate:
    """The output's shape fits ``pattern``: ``"[N,C,?,4,Rest...,...]"``: a number is that dim, ``?``
    any one dim, ``...`` any dims, a name binds one static (or symbolic) dim and ``Name...`` the
    dims it stands for; a name bound before must bind the same again (``matcher.get_symbols()``)."""
    tokens = _shape_tokens(pattern)
    return Predicate(lambda symbols, output: _shape_fits(tokens, output.dims, symbols))


def _shape_tokens(pattern: str) -> list[str]:
    text = str(pattern).strip()
    if not (text.startswith("[") and text.endswith("]")):
        raise InputError(f"shape_matches takes a pattern in brackets, such as '[N,C,?,...]', got {pattern!r}")
    tokens = [token.strip() for token in text[1:-1].split(",") if token.strip()]
    for token in tokens:
        if not re.fullmatch(r"\?|\.\.\.|-?\d+|[A-Za-z_]\w*(\.\.\.)?", token):
            raise InputError(f"shape_matches: {token!r} in {pattern!r} is not a dim; accepted: a number, "
                             "'?', '...', a name, or a name followed by '...'")
    return tokens


def _shape_fits(tokens: list[str], dims: tuple[Any, ...] | None, symbols: Symbols) -> bool:
    """Whether ``dims`` fit ``tokens``; the names they bind are added to ``symbols`` when they do."""
    if dims is None:
        return False
    rest = [i for i, token in enumerate(tokens) if token.endswith("...")]
    if len(rest) > 1 or (not rest and len(tokens) != len(dims)) or len(tokens) - len(rest) > len(dims):
        return False
    split = rest[0] if rest else len(tokens)
    tail = len(tokens) - split - 1 if rest else 0
    pairs = list(zip(tokens[:split], dims[:split], strict=True))
    pairs += list(zip(tokens[len(tokens) - tail:], dims[len(dims) - tail:], strict=True))
    bound = dict(symbols)
    named_rest = bool(rest) and tokens[split] != "..."
    if named_rest and not _bind(bound, tokens[split][:-3], list(dims[split:len(dims) - tail])):
        return False
    if not all(_dim_fits(token, dim, bound) for token, dim in pairs):
        return False
    symbols.update(bound)
    return True


def _dim_fits(token: str, dim: Any, bound: Symbols) -> bool:
    if token == "?":
        return True
    if re.fullmatch(r"-?\d+", token):
        return dim == int(token)
    return _bind(bound, token, dim)


def _bind(bound: Symbols, name: str, value: Any) -> bool:
    """Bind ``name`` to a dim or list of dims (an unknown dim binds nothing); False on a clash."""
    values = value if isinstance(value, list) else [value]
    if any(v is None for v in values):
        return False
    if name in bound:
        return bool(bound[name] == value)
    bound[name] = value
    return True


# --- pattern ops -------------------------------------------------------------------------------


class PatternOp(Node):
    """A node of a pattern only: one output of no element type or shape, which opset functions
    take as an input (as a Parameter of dynamic type and rank)."""

    _pattern_type = "pattern"
    _version_id = "util"

    def __init__(self, inputs: Sequence[PatternOutput] = (), predicate: Any = None) -> None:
        value = ir.Value()
        value.meta[PATTERN_KEY] = True
        value.meta[_NODE_KEY] = self
        super().__init__(self._pattern_type, [value])
        self._pattern_inputs = list(inputs)
        self._predicate = _as_predicate(predicate)

    def _input_values(self) -> list[ir.Value]:
        return [node.output(index)._value for node, index in self._pattern_inputs]  # noqa: SLF001

    def pattern_inputs(self) -> list[PatternOutput]:
        """The pattern outputs this one reads, in order."""
        return list(self._pattern_inputs)

    def match_value(self, matcher: Matcher, graph_value: Port) -> bool:
        """Whether this pattern op matches ``graph_value`` (recording what it matched in ``matcher``)."""
        raise NotImplementedError


class AnyInput(PatternOp):
    """Any output (that ``predicate`` accepts); used twice in one pattern, the same output twice."""

    _pattern_type = "patternLabel"

    def __init__(self, predicate: Any = None) -> None:
        super().__init__((), predicate)

    def match_value(self, matcher: Matcher, graph_value: Port) -> bool:
        if not matcher.check(self._predicate, graph_value):
            return False
        matcher.add_matched(graph_value)
        earlier = matcher.recorded(self)
        if earlier is not None:
            return same_output(earlier, graph_value)
        matcher.record(self, graph_value)
        return True


class WrapType(PatternOp):
    """An op of one of ``type_names`` (``"opset13.MatMul"`` or ``"opset13::MatMul"``; a list for
    several) whose inputs match ``inputs`` (a node, an output or a list; none: any inputs), that
    ``predicate`` accepts: ``WrapType(types[, inputs][, predicate])``."""

    _pattern_type = "WrapType"

    def __init__(self, type_names: str | Sequence[str], *args: Any) -> None:
        inputs, predicate = _inputs_and_predicate("WrapType", args)
        super().__init__(inputs, predicate)
        self._types = op_type_names(type_names, "WrapType")

    @classmethod
    def of_types(cls, types: Sequence[str], inputs: Sequence[PatternOutput],
                 predicate: Predicate) -> WrapType:
        """A WrapType of op type names already checked (``"Relu"``)."""
        made = cls.__new__(cls)
        PatternOp.__init__(made, inputs, predicate)
        made._types = list(types)
        return made

    def get_wrapped_types(self) -> list[str]:
        """The op type names this matches."""
        return list(self._types)

    def match_value(self, matcher: Matcher, graph_value: Port) -> bool:
        node = graph_value.get_node()
        if node.get_type_name() not in self._types or not matcher.check(self._predicate, graph_value):
            return False
        matcher.record(self, graph_value)
        matcher.add_matched(graph_value)
        return not self._pattern_inputs or matcher.match_arguments(self._pattern_inputs, node)


class Or(PatternOp):
    """Whichever of ``inputs`` (patterns: nodes or outputs) matches first."""

    _pattern_type = "patternOr"

    def __init__(self, inputs: Sequence[Any]) -> None:
        if isinstance(inputs, (str, bytes)) or not isinstance(inputs, Sequence):
            raise InputTypeError(f"Or takes a list of patterns (nodes or outputs), got "
                                 f"{type(inputs).__name__}")
        super().__init__([pattern_output(item, "Or") for item in inputs])

    @classmethod
    def of_branches(cls, branches: Sequence[PatternOutput]) -> Or:
        """An Or of pattern outputs."""
        made = cls.__new__(cls)
        PatternOp.__init__(made, branches)
        return made

    def match_value(self, matcher: Matcher, graph_value: Port) -> bool:
        for branch in self._pattern_inputs:
            saved = matcher.save()
            if matcher.match_value(branch, graph_value):
                matcher.record(self, graph_value)
                return True
            matcher.restore(saved)
        return False


class Optional(PatternOp):
    """An op of one of ``type_names`` reading ``inputs``, or, where there is none, its first input
    itself: ``Optional(types[, inputs][, predicate])``."""

    _pattern_type = "patternOptional"

    def __init__(self, type_names: Sequence[str], *args: Any) -> None:
        inputs, predicate = _inputs_and_predicate("Optional", args)
        super().__init__(inputs, predicate)
        self._types = op_type_names(type_names, "Optional")

    def match_value(self, matcher: Matcher, graph_value: Port) -> bool:
        present = WrapType.of_types(self._types, self._pattern_inputs, self._predicate)
        choice: PatternOp = present
        if self._pattern_inputs:  # absent: its first input stands in its place
            choice = Or.of_branches([(present, 0), self._pattern_inputs[0]])
        if not matcher.match_value((choice, 0), graph_value):
            return False
        if present in matcher.get_pattern_value_map():
            matcher.record(self, graph_value)
        return True


def _inputs_and_predicate(what: str, args: tuple[Any, ...]) -> tuple[list[PatternOutput], Any]:
    """The pattern inputs and predicate of ``WrapType(types, [inputs], [predicate])``."""
    if len(args) > 2:
        raise InputTypeError(f"{what} takes type names, then inputs and a predicate, each optional; got "
                             f"{len(args) + 1} arguments")
    inputs: Any = None
    predicate: Any = None
    for arg in args:
        if isinstance(arg, Predicate) or (callable(arg) and not isinstance(arg, (Node, Port))):
            predicate = arg
        else:
            inputs = arg
    if inputs is None:
        return [], predicate
    items = inputs if isinstance(inputs, (list, tuple)) else [inputs]
    return [pattern_output(item, what) for item in items], predicate


def op_type_names(type_names: Any, what: str) -> list[str]:
    """The op type names of ``"opsetN.Type"`` (or ``"opsetN::Type"``) names, or a list of them."""
    names = [type_names] if isinstance(type_names, str) else type_names
    if not isinstance(names, (list, tuple)) or not all(isinstance(n, str) for n in names):
        raise InputTypeError(f"{what} takes an op type name such as 'opset13.MatMul', or a list of them; "
                             f"got {type(type_names).__name__}")
    return [_op_type_name(name) for name in names]


def _op_type_name(name: str) -> str:
    separator = "::" if "::" in name else "."
    opset, _, type_name = name.partition(separator)
    number = opset.removeprefix("opset")
    if not (opset.startswith("opset") and number.isdigit() and 1 <= int(number) <= _LAST_OPSET):
        raise InputError(f"Unsupported opset type: {opset!r} in op type name {name!r}; accepted: "
                         f"'opsetN.Type' or 'opsetN::Type' with N from 1 to {_LAST_OPSET}, such as "
                         "'opset13.MatMul'")
    if type_name not in known_op_types():
        raise InputError(f"Unrecognized operation type: {type_name!r} in {name!r}; accepted: OpenVINO op "
                         "types such as 'MatMul', 'Relu', 'Parameter', 'Constant'")
    return type_name


def known_op_types() -> frozenset[str]:
    """OpenVINO's op type names inferplex knows (those an IR may hold, and Parameter, Constant, Result)."""
    from inferplex.api.ir.ops import BUILDERS

    return frozenset(BUILDERS) | {"Parameter", "Constant", "Result"}


def pattern_output(item: Any, what: str = "Matcher") -> PatternOutput:
    """A pattern given as a node (its first output) or an output port, as (node, output index)."""
    if isinstance(item, Node):
        return item, 0
    value = getattr(item, "_value", None)
    if isinstance(item, Port) and isinstance(value, ir.Value):
        node = value.meta.get(_NODE_KEY)
        return (node, 0) if node is not None else (item.get_node(), item.get_index())
    raise InputTypeError(f"{what} takes patterns as nodes or their outputs (AnyInput(), WrapType(...), "
                         f"ops built with inferplex.opset), got {type(item).__name__}")


def pattern_inputs(node: Node) -> list[PatternOutput]:
    """The pattern outputs a pattern node reads: a pattern op's, or an ordinary op's inputs."""
    if isinstance(node, PatternOp):
        return node.pattern_inputs()
    return [_value_pattern(value) for value in node._input_values()]  # noqa: SLF001 - same package


def _value_pattern(value: ir.Value) -> PatternOutput:
    node = value.meta.get(_NODE_KEY)
    if node is not None:
        return node, 0
    return source_node(value), value.index() or 0


def same_output(first: Port, second: Port) -> bool:
    """Whether two ports are the same output of the same op."""
    return bool(first.get_node() == second.get_node()) and first.get_index() == second.get_index()


# --- the matcher -------------------------------------------------------------------------------


MatchState = tuple[dict[Node, Port], int, Symbols]


class Matcher:
    """Matches a pattern (a node or output) against a graph output: :meth:`match`, then
    :meth:`get_pattern_value_map` (pattern node -> the output it matched), :meth:`get_match_root`."""

    def __init__(self, pattern: Any, name: str = "") -> None:
        if not isinstance(name, str):
            raise InputTypeError(f"Matcher takes a pattern and a name (str), got name {type(name).__name__}")
        self._pattern = pattern_output(pattern, "Matcher")
        self._name = name
        self._clear()

    def _clear(self) -> None:
        self._map: dict[Node, Port] = {}
        self._matched: list[Port] = []
        self._symbols: Symbols = {}
        self._root: Port | None = None

    clear_state = _clear

    def get_name(self) -> str:
        return self._name

    def match(self, graph: Any) -> bool:
        """Whether the pattern matches ``graph`` (a node: its first output; or an output port)."""
        value = _graph_output(graph)
        self._clear()
        if not self.match_value(self._pattern, value):
            self._clear()
            return False
        self._root = value
        return True

    def get_match_root(self) -> Any:
        """The node matched by the pattern's root (None before a match)."""
        return None if self._root is None else self._root.get_node()

    def get_match_value(self) -> Port | None:
        """The output matched by the pattern's root."""
        return self._root

    def get_match_values(self) -> list[Port]:
        """Every output the match went through, in the order it was matched."""
        return list(self._matched)

    def get_match_nodes(self) -> list[Any]:
        """The nodes of :meth:`get_match_values`."""
        return [value.get_node() for value in self._matched]

    def get_pattern_value_map(self) -> dict[Node, Port]:
        """Each pattern node -> the graph output it matched."""
        return dict(self._map)

    def get_symbols(self) -> Symbols:
        """The names :func:`shape_matches` predicates bound in the last match."""
        return dict(self._symbols)

    # The steps the pattern nodes take while matching.

    def save(self) -> MatchState:
        """What the match holds now, to :meth:`restore` where a branch fails."""
        return dict(self._map), len(self._matched), dict(self._symbols)

    def restore(self, state: MatchState) -> None:
        """Forget what was matched since :meth:`save` gave ``state``."""
        self._map, count, self._symbols = dict(state[0]), state[1], dict(state[2])
        del self._matched[count:]

    def record(self, pattern: Node, graph_value: Port) -> None:
        """``pattern`` matched ``graph_value``."""
        self._map[pattern] = graph_value

    def recorded(self, pattern: Node) -> Port | None:
        """The graph output ``pattern`` matched so far in this match, if any."""
        return self._map.get(pattern)

    def add_matched(self, graph_value: Port) -> None:
        """The match went through ``graph_value``."""
        self._matched.append(graph_value)

    def check(self, predicate: Predicate, graph_value: Port) -> bool:
        """Whether ``predicate`` accepts ``graph_value`` (with the shape names bound so far)."""
        return predicate(self._symbols, graph_value)

    def match_value(self, pattern: PatternOutput, graph_value: Port) -> bool:
        """Whether one pattern output matches ``graph_value``."""
        node, index = pattern
        if isinstance(node, PatternOp):
            return node.match_value(self, graph_value)
        if index != graph_value.get_index():
            return False
        self.add_matched(graph_value)
        graph_node = graph_value.get_node()
        if graph_node.get_type_name() != node.get_type_name():
            return False
        if not self.match_arguments(pattern_inputs(node), graph_node):
            return False
        self.record(node, graph_value)
        return True

    def match_arguments(self, patterns: Sequence[PatternOutput], graph_node: Any) -> bool:
        """Whether ``graph_node``'s inputs match ``patterns``, in order (any order for Add and the
        other commutative ops)."""
        arguments = graph_node.input_values()
        if len(arguments) != len(patterns):
            return False
        if graph_node.get_type_name() not in _COMMUTATIVE:
            return self._match_all(patterns, arguments)
        for order in itertools.permutations(patterns):
            saved = self.save()
            if self._match_all(order, arguments):
                return True
            self.restore(saved)
        return False

    def _match_all(self, patterns: Sequence[PatternOutput], arguments: Sequence[Port]) -> bool:
        return all(self.match_value(p, a) for p, a in zip(patterns, arguments, strict=True))

    def __repr__(self) -> str:
        return f"<Matcher {self._name!r}>"


def _graph_output(graph: Any) -> Port:
    if isinstance(graph, Node):
        port: Port = graph.output(0)
        return port
    if isinstance(graph, Port):
        return graph
    raise InputTypeError(f"Matcher.match takes a node or an output port, got {type(graph).__name__}")
