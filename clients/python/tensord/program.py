"""A small program builder for tensord (API.md 4, 4.2).

    p = c.program()                       # or ProgramBuilder()
    x = p.input("x", "float32", [8])
    y = p.add(x, 1.0)
    s = p.sum(y)
    p.output(y, s)
    c.run(p.build(), inputs={"x": ...})

Control flow takes callables that get a sub-builder and the local inputs:

    pred = p.input("p", "bool", [])
    z = p.cond(pred, [x], then=lambda b, a: b.mul(a, 2.0), else_=lambda b, a: b.neg(a))

Subprogram inputs need dtypes and shapes: they are known for program inputs
and for elementwise ops of them; give ``specs=[(dtype, shape), ...]`` where
they are not.
"""

from __future__ import annotations

import itertools
from typing import Any, Callable, Dict, List, Literal, Optional, Sequence, Tuple, Union, overload

from .dtypes import dtype_name
from .graph import Graph as Graph  # noqa: F401 - Graph lived here once: still importable from here

_SAME_META_OPS = {"add", "sub", "mul", "div", "neg", "abs", "exp", "log", "sqrt", "sin", "cos", "tanh",
                  "maximum", "minimum", "relu", "sigmoid", "clone", "pow", "remainder"}
_BOOL_OPS = {"lt", "le", "gt", "ge", "eq", "ne", "logical_and", "logical_or", "logical_not"}

#: a subprogram input's ``(dtype, shape)``
Spec = Tuple[Any, List[int]]
#: a subprogram: a builder, or a callable that gets a sub-builder and the local inputs
#: and returns the subprogram's outputs (a Value, several, or None)
Body = Union["ProgramBuilder", Callable[..., Any]]
#: what an op with several outputs gives: a Value, or a tuple of them when there are two or more
Values = Union["Value", Tuple["Value", ...]]


class Value:
    """A value of a program under construction (a name, maybe a known meta)."""

    def __init__(self, name: str, dtype: Optional[str] = None, shape: Optional[Sequence[int]] = None) -> None:
        self.name = name
        self.dtype = dtype
        self.shape: Optional[List[int]] = None if shape is None else list(shape)

    def spec(self) -> Dict[str, Any]:
        return {"dtype": self.dtype, "shape": self.shape}

    def __repr__(self) -> str:
        return "Value(%r, %s, %s)" % (self.name, self.dtype, self.shape)


def _dtype(d: Any) -> Any:
    try:
        return dtype_name(d)
    except ValueError:
        return d  # let the server name what it does not know


def _arg(a: Any) -> Any:
    if isinstance(a, Value):
        return a.name
    if isinstance(a, (list, tuple)) and a and all(isinstance(e, Value) for e in a):
        return [e.name for e in a]
    return a


def _one_or_tuple(vals: List[Value]) -> Any:
    """One Value for one output, a tuple of them for several (the ops' return
    convention; typed Any where the count is the caller's data)."""
    return vals[0] if len(vals) == 1 else tuple(vals)


class ProgramBuilder:
    """Builds an API.md 4 program: :meth:`input`, ops (``p.<op>(...)`` or
    :meth:`op`), :meth:`output`, then :meth:`build` gives the dict."""

    _ids = itertools.count(1)

    def __init__(self) -> None:
        self.inputs: Dict[str, Dict[str, Any]] = {}
        self.nodes: List[Dict[str, Any]] = []
        self.outputs: List[Any] = []
        self._n = 0
        self._prefix = "b%d_" % next(ProgramBuilder._ids)

    def _fresh(self, kind: str = "v") -> str:
        self._n += 1
        return "%s%s%d" % (self._prefix, kind, self._n)

    def input(self, name: str, dtype: Any, shape: Sequence[int]) -> Value:
        """A program input; ``dtype`` is a tensord name, an alias, a numpy or a torch dtype."""
        dtype = _dtype(dtype)
        self.inputs[name] = {"dtype": dtype, "shape": [int(s) for s in shape]}
        return Value(name, dtype, shape)

    def output(self, *values: Any) -> "ProgramBuilder":
        for v in values:
            self.outputs.append(v.name if isinstance(v, Value) else v)
        return self

    @overload
    def op(self, op: str, *args: Any, outputs: Literal[1] = 1, **kwargs: Any) -> Value: ...

    @overload
    def op(self, op: str, *args: Any, outputs: int, **kwargs: Any) -> Values: ...

    def op(self, op: str, *args: Any, outputs: int = 1, **kwargs: Any) -> Values:
        """A node ``op(*args, **kwargs)`` with ``outputs`` results (a Value, or a tuple of them)."""
        names = [self._fresh() for _ in range(outputs)]
        node: Dict[str, Any] = {"id": self._fresh("n"), "op": op, "args": [_arg(a) for a in args], "outputs": names}
        if kwargs:
            node["kwargs"] = {k: _arg(v) for k, v in kwargs.items()}
        self.nodes.append(node)
        first = next((a for a in args if isinstance(a, Value)), None)
        dtype: Optional[str] = None
        shape: Optional[List[int]] = None
        if first is not None and first.shape is not None:
            if op in _SAME_META_OPS and all(not isinstance(a, Value) or a.shape == first.shape for a in args):
                dtype, shape = first.dtype, first.shape
            elif op in _BOOL_OPS and all(not isinstance(a, Value) or a.shape == first.shape for a in args):
                dtype, shape = "bool", first.shape
        vals = [Value(n, dtype, shape) for n in names]
        return vals[0] if outputs == 1 else tuple(vals)

    def __getattr__(self, name: str) -> Callable[..., Any]:
        """``p.<op>(*args, outputs=1, **kwargs)`` is ``p.op("<op>", ...)``."""
        if name.startswith("_"):
            raise AttributeError(name)
        return lambda *args, **kwargs: self.op(name, *args, **kwargs)

    def build(self) -> Dict[str, Any]:
        prog: Dict[str, Any] = {"nodes": self.nodes, "outputs": list(self.outputs)}
        if self.inputs:
            prog["inputs"] = dict(self.inputs)
        return prog

    # -- control flow
    def _sub(self, fn: Body, specs: Sequence[Spec]) -> Dict[str, Any]:
        if isinstance(fn, ProgramBuilder):
            return fn.build()
        b = ProgramBuilder()
        args = [b.input("a%d" % i, d, s) for i, (d, s) in enumerate(specs)]
        res = fn(b, *args)
        if res is None:
            res = ()
        if not isinstance(res, (tuple, list)):
            res = (res,)
        b.output(*res)
        return b.build()

    @staticmethod
    def _specs(values: Sequence[Any], specs: Optional[Sequence[Tuple[Any, Sequence[int]]]]) -> List[Spec]:
        if specs is not None:
            return [(d, list(s)) for d, s in specs]
        out: List[Spec] = []
        for v in values:
            if not isinstance(v, Value) or v.shape is None:
                raise ValueError("the dtype/shape of %r is unknown: pass specs=[(dtype, shape), ...]" % (v,))
            out.append((v.dtype, v.shape))
        return out

    def _control(self, op: str, args: List[Any], n_out: int, subs: Dict[str, Any], kwargs: Optional[Dict[str, Any]],
                 result_specs: Optional[Sequence[Spec]] = None) -> Any:
        names = [self._fresh() for _ in range(n_out)]
        node: Dict[str, Any] = {"id": self._fresh("n"), "op": op, "args": args, "outputs": names}
        node.update(subs)
        if kwargs:
            node["kwargs"] = kwargs
        self.nodes.append(node)
        rs: Sequence[Tuple[Any, Optional[List[int]]]] = result_specs or [(None, None)] * n_out
        return _one_or_tuple([Value(n, d, s) for n, (d, s) in zip(names, rs)])

    def cond(self, pred: Value, operands: Sequence[Value], then: Body, else_: Body, n_out: int = 1,
             specs: Optional[Sequence[Tuple[Any, Sequence[int]]]] = None) -> Any:
        """``then(operands)`` if ``pred`` else ``else_(operands)``: ``n_out`` Values (one, or a tuple)."""
        sp = self._specs(operands, specs)
        subs = {"then": self._sub(then, sp), "else": self._sub(else_, sp)}
        return self._control("cond", [pred.name] + [o.name for o in operands], n_out, subs, None)

    def while_loop(self, cond: Body, body: Body, carries: Sequence[Value], max_iters: Optional[int] = None,
                   specs: Optional[Sequence[Tuple[Any, Sequence[int]]]] = None) -> Any:
        """``body`` while ``cond`` holds: one Value per carry (a tuple for several)."""
        sp = self._specs(carries, specs)
        subs = {"cond": self._sub(cond, sp), "body": self._sub(body, sp)}
        kw = {"max_iters": max_iters} if max_iters is not None else None
        return self._control("while_loop", [c.name for c in carries], len(carries), subs, kw, sp)

    def scan(self, body: Body, init: Sequence[Value], xs: Sequence[Value], n_ys: int = 1, dim: int = 0,
             reverse: bool = False, specs: Optional[Sequence[Tuple[Any, Sequence[int]]]] = None) -> Any:
        """torch's ``scan``: the final carries then ``n_ys`` stacked outputs (a tuple for several)."""
        init, xs = list(init), list(xs)
        sp = self._specs(list(init) + list(xs), specs)
        csp = sp[:len(init)]
        xsp: List[Spec] = []
        for d, s in sp[len(init):]:
            s = list(s)
            del s[dim]
            xsp.append((d, s))
        subs = {"body": self._sub(body, csp + xsp)}
        return self._control("scan", [[v.name for v in init], [v.name for v in xs]], len(init) + n_ys, subs,
                             {"dim": dim, "reverse": reverse})

    def map(self, body: Body, xs: Sequence[Value], extra: Sequence[Value] = (), n_out: int = 1,
            specs: Optional[Sequence[Tuple[Any, Sequence[int]]]] = None) -> Any:
        """``body`` over the leading dimension of ``xs``: ``n_out`` Values (one, or a tuple)."""
        xs, extra = list(xs), list(extra)
        sp = self._specs(list(xs) + list(extra), specs)
        xsp: List[Spec] = [(d, list(s)[1:]) for d, s in sp[:len(xs)]]
        subs = {"body": self._sub(body, xsp + sp[len(xs):])}
        return self._control("map", [[v.name for v in xs]] + [v.name for v in extra], n_out, subs, None)

    def associative_scan(self, combine_fn: Body, xs: Sequence[Value], dim: int = 0, reverse: bool = False,
                         specs: Optional[Sequence[Tuple[Any, Sequence[int]]]] = None) -> Any:
        """torch's ``associative_scan`` of ``xs`` with ``combine_fn``: one Value per x (a tuple for several)."""
        xs = list(xs)
        sp = self._specs(xs, specs)
        ssp: List[Spec] = []
        for d, s in sp:
            s = list(s)
            del s[dim]
            ssp.append((d, s))
        subs = {"combine_fn": self._sub(combine_fn, ssp + ssp)}
        return self._control("associative_scan", [[v.name for v in xs]], len(xs), subs,
                             {"dim": dim, "reverse": reverse}, sp)

