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
from typing import Any, Dict, Optional, Sequence

from .dtypes import dtype_name
from .errors import NotFound

_SAME_META_OPS = {"add", "sub", "mul", "div", "neg", "abs", "exp", "log", "sqrt", "sin", "cos", "tanh",
                  "maximum", "minimum", "relu", "sigmoid", "clone", "pow", "remainder"}
_BOOL_OPS = {"lt", "le", "gt", "ge", "eq", "ne", "logical_and", "logical_or", "logical_not"}


class Value:
    """A value of a program under construction (a name, maybe a known meta)."""

    def __init__(self, name, dtype=None, shape=None):
        self.name = name
        self.dtype = dtype
        self.shape = None if shape is None else list(shape)

    def spec(self):
        return {"dtype": self.dtype, "shape": self.shape}

    def __repr__(self):
        return "Value(%r, %s, %s)" % (self.name, self.dtype, self.shape)


def _dtype(d):
    try:
        return dtype_name(d)
    except ValueError:
        return d  # let the server name what it does not know


def _arg(a):
    if isinstance(a, Value):
        return a.name
    if isinstance(a, (list, tuple)) and a and all(isinstance(e, Value) for e in a):
        return [e.name for e in a]
    return a


class ProgramBuilder:
    _ids = itertools.count(1)

    def __init__(self):
        self.inputs = {}
        self.nodes = []
        self.outputs = []
        self._n = 0
        self._prefix = "b%d_" % next(ProgramBuilder._ids)

    def _fresh(self, kind="v"):
        self._n += 1
        return "%s%s%d" % (self._prefix, kind, self._n)

    def input(self, name, dtype, shape):
        """A program input; ``dtype`` is a tensord name, an alias, a numpy or a torch dtype."""
        dtype = _dtype(dtype)
        self.inputs[name] = {"dtype": dtype, "shape": [int(s) for s in shape]}
        return Value(name, dtype, shape)

    def output(self, *values):
        for v in values:
            self.outputs.append(v.name if isinstance(v, Value) else v)
        return self

    def op(self, op, *args, outputs=1, **kwargs):
        names = [self._fresh() for _ in range(outputs)]
        node = {"id": self._fresh("n"), "op": op, "args": [_arg(a) for a in args], "outputs": names}
        if kwargs:
            node["kwargs"] = {k: _arg(v) for k, v in kwargs.items()}
        self.nodes.append(node)
        first = next((a for a in args if isinstance(a, Value)), None)
        dtype = shape = None
        if first is not None and first.shape is not None:
            if op in _SAME_META_OPS and all(not isinstance(a, Value) or a.shape == first.shape for a in args):
                dtype, shape = first.dtype, first.shape
            elif op in _BOOL_OPS and all(not isinstance(a, Value) or a.shape == first.shape for a in args):
                dtype, shape = "bool", first.shape
        vals = [Value(n, dtype, shape) for n in names]
        return vals[0] if outputs == 1 else tuple(vals)

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        return lambda *args, **kwargs: self.op(name, *args, **kwargs)

    def build(self):
        prog = {"nodes": self.nodes, "outputs": list(self.outputs)}
        if self.inputs:
            prog["inputs"] = dict(self.inputs)
        return prog

    # -- control flow
    def _sub(self, fn, specs):
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
    def _specs(values, specs):
        if specs is not None:
            return [(d, list(s)) for d, s in specs]
        out = []
        for v in values:
            if not isinstance(v, Value) or v.shape is None:
                raise ValueError("the dtype/shape of %r is unknown: pass specs=[(dtype, shape), ...]" % (v,))
            out.append((v.dtype, v.shape))
        return out

    def _control(self, op, args, n_out, subs, kwargs, result_specs=None):
        names = [self._fresh() for _ in range(n_out)]
        node = {"id": self._fresh("n"), "op": op, "args": args, "outputs": names}
        node.update(subs)
        if kwargs:
            node["kwargs"] = kwargs
        self.nodes.append(node)
        rs = result_specs or [(None, None)] * n_out
        vals = [Value(n, d, s) for n, (d, s) in zip(names, rs)]
        return vals[0] if n_out == 1 else tuple(vals)

    def cond(self, pred, operands, then, else_, n_out=1, specs=None):
        sp = self._specs(operands, specs)
        subs = {"then": self._sub(then, sp), "else": self._sub(else_, sp)}
        return self._control("cond", [pred.name] + [o.name for o in operands], n_out, subs, None)

    def while_loop(self, cond, body, carries, max_iters=None, specs=None):
        sp = self._specs(carries, specs)
        subs = {"cond": self._sub(cond, sp), "body": self._sub(body, sp)}
        kw = {"max_iters": max_iters} if max_iters is not None else None
        return self._control("while_loop", [c.name for c in carries], len(carries), subs, kw, sp)

    def scan(self, body, init, xs, n_ys=1, dim=0, reverse=False, specs=None):
        init, xs = list(init), list(xs)
        sp = self._specs(init + xs, specs)
        csp = sp[:len(init)]
        xsp = []
        for d, s in sp[len(init):]:
            s = list(s)
            del s[dim]
            xsp.append((d, s))
        subs = {"body": self._sub(body, csp + xsp)}
        return self._control("scan", [[v.name for v in init], [v.name for v in xs]], len(init) + n_ys, subs,
                             {"dim": dim, "reverse": reverse})

    def map(self, body, xs, extra=(), n_out=1, specs=None):
        xs, extra = list(xs), list(extra)
        sp = self._specs(xs + extra, specs)
        xsp = [(d, list(s)[1:]) for d, s in sp[:len(xs)]]
        subs = {"body": self._sub(body, xsp + sp[len(xs):])}
        return self._control("map", [[v.name for v in xs]] + [v.name for v in extra], n_out, subs, None)

    def associative_scan(self, combine_fn, xs, dim=0, reverse=False, specs=None):
        xs = list(xs)
        sp = self._specs(xs, specs)
        ssp = []
        for d, s in sp:
            s = list(s)
            del s[dim]
            ssp.append((d, s))
        subs = {"combine_fn": self._sub(combine_fn, ssp + ssp)}
        return self._control("associative_scan", [[v.name for v in xs]], len(xs), subs,
                             {"dim": dim, "reverse": reverse}, sp)


class Graph:
    """A captured graph (``POST /v1/graphs``): replay it many times.

    A context manager: the graph (and its pool, unless another graph shares
    it) is deleted on leaving the ``with`` block::

        with c.capture(program) as g:
            for x in batches:
                y = g.replay(x=x)["y"]
    """

    def __init__(self, client: Any, info: Dict[str, Any]) -> None:
        self.client = client
        self.id: str = info["id"]
        #: the name given at capture (``c.capture(..., name=...)``), or None;
        #: the graph's KServe model name is this name, else its id (API.md 11)
        self.name: Optional[str] = info.get("name")
        self.info_at_capture = info
        self.deleted = False

    def replay(self, return_: Optional[Sequence[str]] = None, store: Optional[Dict[str, str]] = None,
               **inputs: Any) -> Dict[str, Any]:
        """Run the captured graph on ``inputs`` (numpy or torch, the captured shapes and
        dtypes: 409 ``Conflict`` otherwise); returns ``{name: array}`` as ``run`` does."""
        return self.client._graph_replay(self.id, inputs, return_=return_, store=store)

    def info(self) -> Dict[str, Any]:
        return self.client._request("GET", "/v1/graphs/" + self.id).json()

    def dot(self) -> str:
        return self.client._request("GET", "/v1/graphs/" + self.id, params={"format": "dot"}).text

    def delete(self) -> None:
        """Free the graph (``DELETE /v1/graphs/{id}``). Deleting it twice is not an error."""
        if self.deleted:
            return
        try:
            self.client._request("DELETE", "/v1/graphs/" + self.id)
        except NotFound:
            pass
        self.deleted = True

    def __enter__(self) -> "Graph":
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            self.delete()
            return
        try:  # an error inside the block is the one to see
            self.delete()
        except Exception:  # noqa: BLE001
            pass

    @property
    def model(self) -> str:
        """The graph's KServe v2 model name (``/v2/models/{model}``): its name, else its id."""
        return self.name if self.name is not None else self.id

    def __repr__(self) -> str:
        if self.name is not None:
            return "Graph(%r, name=%r)" % (self.id, self.name)
        return "Graph(%r)" % self.id
