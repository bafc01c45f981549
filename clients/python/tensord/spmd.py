"""SPMD inputs for requests that run on several ranks (API.md 8).

    out = c.run(program, ranks=2, inputs={
        "x": tensord.per_rank([x0, x1]),     # each rank its own, in the group's order
        "w": tensord.shard(w, dim=0),        # split as torch.tensor_split(w, 2, 0)
        "b": b,                              # a plain tensor: replicated
    })
    out["y"]   # a replicated output: one value
    out["z"]   # a per-rank output: a list, in the group's order

The wrappers only say how a value travels; the server checks them (a
``per_rank`` list whose length is not the group's, a ``shard`` of a 0-d
tensor or along a dim it lacks, are its ``400 bad_request``).
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Iterator, List, Sequence

Encoder = Callable[[Any], Dict[str, Any]]


class PerRank:
    """One value per rank, in the group's order: ``{"per_rank": [t0, t1, ...]}``."""

    __slots__ = ("values",)

    def __init__(self, values: Sequence[Any]) -> None:
        if not isinstance(values, (list, tuple)):
            raise TypeError("per_rank takes a list or tuple of tensors (one per rank), got %s"
                            % type(values).__name__)
        self.values: List[Any] = list(values)

    def tensors(self) -> Iterator[Any]:
        return iter(self.values)

    def to_json(self, encode: Encoder) -> Dict[str, Any]:
        return {"per_rank": [encode(v) for v in self.values]}

    def map(self, fn: Callable[[Any], Any]) -> "PerRank":
        return PerRank([fn(v) for v in self.values])

    def __len__(self) -> int:
        return len(self.values)

    def __repr__(self) -> str:
        return "per_rank(<%d tensors>)" % len(self.values)


class Shard:
    """One tensor split along ``dim`` over the group's ranks, as
    ``torch.tensor_split(value, len(group), dim)`` splits it (the first ranks
    get one more when it does not divide): ``{"shard": t, "dim": d}``."""

    __slots__ = ("value", "dim")

    def __init__(self, value: Any, dim: int = 0) -> None:
        if isinstance(dim, bool) or not isinstance(dim, int):
            raise TypeError("shard's dim must be an int, got %r" % (dim,))
        self.value = value
        self.dim = int(dim)

    def tensors(self) -> Iterator[Any]:
        return iter((self.value,))

    def to_json(self, encode: Encoder) -> Dict[str, Any]:
        return {"shard": encode(self.value), "dim": self.dim}

    def map(self, fn: Callable[[Any], Any]) -> "Shard":
        return Shard(fn(self.value), self.dim)

    def __repr__(self) -> str:
        return "shard(<tensor>, dim=%d)" % self.dim


def per_rank(values: Sequence[Any]) -> PerRank:
    """An input that gives each rank of the request's group its own tensor
    (numpy, torch, TensorData or ``(array, dtype)``), in the group's order."""
    return PerRank(values)


def shard(value: Any, dim: int = 0) -> Shard:
    """An input split along ``dim`` over the request's group (uneven splits
    allowed: the first ranks get one more, as ``torch.tensor_split``)."""
    return Shard(value, dim)


def is_spmd(value: Any) -> bool:
    return isinstance(value, (PerRank, Shard))
