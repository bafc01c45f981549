"""Captured graphs (``POST /v1/graphs``, API.md 4.2): :class:`Graph`.

    with c.capture(program, inputs_spec={"x": x}) as g:   # Client.capture
        y = g.replay(x=x)["y"]

A Graph holds its client as a :class:`GraphClient` (what it calls of
:class:`tensord.Client`), so this module imports neither ``client`` nor
``jobs``.
"""

from __future__ import annotations

from typing import Any, Dict, Mapping, Optional, Protocol, Sequence

import requests

from .errors import NotFound


class GraphClient(Protocol):
    """What a :class:`Graph` needs of its client (:class:`tensord.Client` is one)."""

    def _request(self, method: str, path_or_url: str, *, deadline_ms: Optional[float] = None,
                 retries: Optional[int] = None, **kw: Any) -> requests.Response: ...

    def _graph_replay(self, graph_id: str, inputs: Mapping[str, Any], return_: Optional[Sequence[str]] = None,
                      store: Optional[Mapping[str, str]] = None, as_torch: Optional[bool] = None
                      ) -> Dict[str, Any]: ...


class Graph:
    """A captured graph (``POST /v1/graphs``): replay it many times.

    A context manager: the graph (and its pool, unless another graph shares
    it) is deleted on leaving the ``with`` block::

        with c.capture(program) as g:
            for x in batches:
                y = g.replay(x=x)["y"]
    """

    def __init__(self, client: GraphClient, info: Dict[str, Any]) -> None:
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
        """``GET /v1/graphs/{id}``: the graph's description now."""
        doc: Dict[str, Any] = self.client._request("GET", "/v1/graphs/" + self.id).json()
        return doc

    def dot(self) -> str:
        """The graph in Graphviz's dot language (``?format=dot``)."""
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
