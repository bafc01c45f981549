"""HTTP client for tensord (API.md; section 12 is this client's contract).

Needs numpy, requests and websocket-client (the stream; imported when
used); torch (``tensord[torch]``) and tqdm (``tensord[progress]``) are
used when present. Arrays travel as safetensors by default
(``transport="safetensors"``: the request body is sent from the arrays' own
memory, the answer is read into one buffer the results are views of);
``transport="json"`` sends JSON tensors with base64 payloads and reads JSON
answers (API.md 3.1).

(Long file: ``Client`` mirrors the whole REST API, one method per route, as
API.md 12 lists them; splitting the class would scatter that contract. How
answers are read and decoded lives in :mod:`tensord._wire`, shared with
:mod:`tensord.jobs`.)
"""

from __future__ import annotations

import json
import math
import threading
import time
import urllib.parse
import uuid
import weakref
from typing import Any, Dict, Iterable, Iterator, List, Mapping, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np
import requests

from . import _jsonbody
from . import _torch
from . import mx as _mx
from . import safetensors as st
from . import spmd as _spmd
from ._wire import _collect_outputs, _json_doc, _read_body, from_json_tensor
# the rest of what moved to _wire, still importable from here as before (patching
# these names here does not reach _wire's own functions: patch tensord._wire)
from ._wire import (_STREAM_JSON_BYTES, _consume, _decode_output, _flatten, _inline, _num,  # noqa: F401
                    _readable_length, _text_buffer)
from .errors import ClientTimeout, TensordError, TransportError, error_class, error_from_body
from .dtypes import TensorData, dtype_name
from .jobs import Job
from .graph import Graph
from .program import ProgramBuilder

SAFETENSORS = "application/vnd.safetensors"
JSON = "application/json"

#: what a call with ``deadline_ms`` waits beyond the deadline for the answer
#: (the server answers 504 at the deadline; this covers encoding and the wire)
DEADLINE_MARGIN_S = 10.0
#: bodies up to this size are joined into one buffer (one send); larger ones
#: go out as the list of their tensors' memoryviews
_JOIN_BELOW = 1 << 20
#: a ``Retry-After``-less 503 waits this long, doubling per attempt
_DEFAULT_RETRY_S = 1.0

# (torch results?, torch device to move them to or None)
_Mode = Tuple[bool, Any]
#: ``ranks=`` of a request: the whole world (R) or a subgroup in its order (API.md 8)
Ranks = Union[int, Sequence[int]]


# ---------------------------------------------------------------- JSON tensors

def to_json_tensor(value: Any, dtype: Any = None, b64: bool = True) -> Dict[str, Any]:
    """Encode a tensor as an API.md 3.1 JSON tensor (``b64`` or flat ``data``);
    an MxTensor in API.md 7's JSON form."""
    doc: Dict[str, Any] = _jsonbody.plain(_json_tensor(value, dtype, b64))
    return doc


def _json_tensor(value: Any, dtype: Any = None, b64: bool = True) -> Dict[str, Any]:
    """to_json_tensor with the base64 text left as the encoder's bytes (the
    request bodies' form: tensord._jsonbody)."""
    if isinstance(value, _mx.MxTensor):
        d: Dict[str, Any] = value.metadata()
        d["elements"] = _json_tensor(value.elements, b64=b64)
        d["scale"] = _json_tensor((value.scale, "float8_e8m0fnu"), b64=b64)
        return d
    name, shape, mv = st.tensor_buffer(value, dtype)
    if b64:
        return {"dtype": name, "shape": shape, "b64": _jsonbody.RawB64(mv)}
    arr = st.from_bytes(mv, name, shape, copy=False)
    if isinstance(arr, TensorData):
        flat = arr.to_float32().reshape(-1).astype(np.float64)
    else:
        flat = arr.reshape(-1)
    return {"dtype": name, "shape": shape, "data": [_json_scalar(x) for x in flat]}


def _json_scalar(x: Any) -> Any:
    if isinstance(x, (np.complexfloating, complex)):
        return [_json_scalar(float(x.real)), _json_scalar(float(x.imag))]
    if isinstance(x, (np.bool_, bool)):
        return bool(x)
    if isinstance(x, (np.integer, int)):
        return int(x)
    f = float(x)
    if math.isnan(f):
        return "nan"
    if math.isinf(f):
        return "inf" if f > 0 else "-inf"
    return f


def _ranks_field(ranks: Any) -> Any:
    """``ranks=`` as the request's ``"ranks"``: an int, or a list of ints."""
    if isinstance(ranks, bool):
        raise TypeError("ranks must be an int or a list of ints, got %r" % (ranks,))
    if isinstance(ranks, (int, np.integer)):
        return int(ranks)
    if isinstance(ranks, (list, tuple, range)) and all(
            isinstance(r, (int, np.integer)) and not isinstance(r, bool) for r in ranks):
        return [int(r) for r in ranks]
    raise TypeError("ranks must be an int or a list of ints, got %r" % (ranks,))


def dtype_name_of(value: Any) -> str:
    """The tensord dtype name of a tensor value (numpy, torch, TensorData, (array, dtype))."""
    if isinstance(value, TensorData):
        return value.dtype_name
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[1], str):
        return dtype_name(value[1])
    if _torch.is_tensor(value):
        return _torch.dtype_name_of(value)
    return dtype_name(np.asarray(value).dtype)


def shape_of(value: Any) -> List[int]:
    if isinstance(value, TensorData):
        return list(value.shape)
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[1], str):
        return [int(s) for s in np.shape(value[0])]
    if _torch.is_tensor(value):
        return [int(s) for s in value.shape]
    return list(np.shape(value))


def _spec_of(v: Any) -> Dict[str, Any]:
    """An input spec ``{dtype, shape}`` from a dict, a ``(dtype, shape)`` pair or an example tensor."""
    if isinstance(v, dict):
        return v
    if isinstance(v, _spmd.PerRank):  # a graph captured with ranks: one spec per rank
        return {"per_rank": [_spec_of(e) for e in v.values]}
    if isinstance(v, (tuple, list)) and len(v) == 2 and isinstance(v[1], (list, tuple)):
        return {"dtype": dtype_name(v[0]), "shape": [int(s) for s in v[1]]}
    return {"dtype": dtype_name_of(v), "shape": shape_of(v)}


class EighResult(NamedTuple):
    """What :meth:`Client.eigh` returns, as ``torch.linalg.eigh`` does."""
    eigenvalues: Any
    eigenvectors: Any


# ---------------------------------------------------------------- bodies

class _Body:
    """A request body sent as the buffers it is made of (http.client sends each
    with ``sendall``), with a length so that it goes out with Content-Length."""

    def __init__(self, parts: Sequence[Any], total: int) -> None:
        self.parts = parts
        self.total = total

    def __len__(self) -> int:
        return self.total

    def __iter__(self) -> Iterator[Any]:
        for p in self.parts:
            if isinstance(p, _jsonbody.RawB64):
                yield from p.chunks()  # encoded as it is sent
            else:
                yield p


def _parts_body(parts: Sequence[Any], total: int) -> Any:
    if total <= _JOIN_BELOW or len(parts) == 1:
        return b"".join(parts)
    return _Body(parts, total)


def _safetensors_body(tensors: Mapping[str, Any], metadata: Optional[Mapping[str, Any]] = None) -> Any:
    return _parts_body(*st.encode_parts(tensors, metadata))


def _json_body(doc: Any) -> Any:
    """A JSON request body; tensors' base64 bytes are sent as they are."""
    return _parts_body(*_jsonbody.dumps_parts(doc))


# ---------------------------------------------------------------- client

class Client:
    """A tensord client (API.md section 12).

    >>> c = Client("http://127.0.0.1:8080")
    >>> c.put("x", np.ones((2, 2), np.float32))
    >>> c.get("x")

    ``timeout`` (seconds, None for none) bounds connecting and, for a call
    without ``deadline_ms``, the wait for the answer; a call with
    ``deadline_ms`` waits at least the deadline plus :data:`DEADLINE_MARGIN_S`.
    ``retries``: 429 and 503 answers are retried after their ``Retry-After``
    at most this many times per call (0: never). ``as_torch``: results are
    torch tensors for every call (they are anyway when a call's inputs are).

    One Client may be shared by threads: each thread gets its own HTTP
    session (connection pool); ``last_job`` and ``last_request_id`` are
    per thread.
    """

    def __init__(self, url: str = "http://127.0.0.1:8080", token: Optional[str] = None,
                 timeout: Optional[float] = 60, retries: int = 3, as_torch: bool = False, *,
                 transport: str = "safetensors") -> None:
        if transport not in ("safetensors", "json"):
            raise ValueError("transport must be 'safetensors' or 'json'")
        if retries < 0:
            raise ValueError("retries must be >= 0")
        self.url = url.rstrip("/")
        self.token = token
        self.timeout = timeout
        self.retries = int(retries)
        self.as_torch = bool(as_torch)
        self.transport = transport
        self._local = threading.local()
        self._sessions: "weakref.WeakSet[requests.Session]" = weakref.WeakSet()
        self._sessions_lock = threading.Lock()
        if as_torch:
            _torch.require()

    def __repr__(self) -> str:
        return "Client(%r, transport=%r, as_torch=%r)" % (self.url, self.transport, self.as_torch)

    # -- per-thread state
    @property
    def session(self) -> requests.Session:
        """This thread's ``requests.Session``."""
        s = getattr(self._local, "session", None)
        if s is None:
            s = requests.Session()
            # The environment's proxies, CA bundle and .netrc, read once for
            # the session: with trust_env on, requests reads them from
            # os.environ on every request, most of a tiny call's own time.
            env = s.merge_environment_settings(self.url, {}, None, None, None)
            s.proxies.update(env["proxies"])
            if env["verify"] not in (None, True):
                s.verify = env["verify"]
            if not self.token:
                s.auth = requests.utils.get_netrc_auth(self.url)
            s.trust_env = False
            if self.token:
                s.headers["Authorization"] = "Bearer " + self.token
            self._local.session = s
            with self._sessions_lock:
                self._sessions.add(s)
        return s

    @property
    def last_job(self) -> Optional[Dict[str, Any]]:
        """The ``job`` description of this thread's last run, replay or job result."""
        return getattr(self._local, "last_job", None)

    @last_job.setter
    def last_job(self, value: Optional[Dict[str, Any]]) -> None:
        self._local.last_job = value

    @property
    def last_request_id(self) -> Optional[str]:
        return getattr(self._local, "last_request_id", None)

    def close(self) -> None:
        with self._sessions_lock:
            sessions = list(self._sessions)
        for s in sessions:
            s.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- plumbing
    def _tensor_url(self, name: str) -> str:
        return self.url + "/v1/tensors/" + urllib.parse.quote(name, safe="/")

    def _timeouts(self, deadline_ms: Optional[float]) -> Any:
        if self.timeout is None:
            return None
        read = float(self.timeout)
        if deadline_ms:
            read = max(read, deadline_ms / 1000.0 + DEADLINE_MARGIN_S)
        return (float(self.timeout), read)

    def _request(self, method: str, path_or_url: str, *, deadline_ms: Optional[float] = None,
                 retries: Optional[int] = None, **kw: Any) -> requests.Response:
        """One call: retries 429/503 after Retry-After, raises the typed error of a failure."""
        url = path_or_url if path_or_url.startswith("http") else self.url + path_or_url
        kw.setdefault("timeout", self._timeouts(deadline_ms))
        budget = self.retries if retries is None else retries
        attempt = 0
        last: Optional[TensordError] = None
        while True:
            try:
                resp = self.session.request(method, url, **kw)
            except requests.RequestException as e:
                if last is not None:
                    # A retry that finds no server (it was draining, now it is gone):
                    # the answer it did give says more than "connection refused".
                    raise last from e
                if isinstance(e, requests.Timeout):
                    raise ClientTimeout(0, "client_timeout", "%s %s: %s" % (method, url, e)) from e
                raise TransportError(0, "connection_error", "%s %s: %s" % (method, url, e)) from e
            self._local.last_request_id = resp.headers.get("X-Request-Id")
            if resp.status_code < 400:
                return resp
            err = TensordError.from_response(resp)
            resp.close()
            if resp.status_code not in (429, 503) or attempt >= budget:
                raise err
            last = err
            attempt += 1
            delay = err.retry_after
            if delay is None:
                delay = _DEFAULT_RETRY_S * 2 ** (attempt - 1)
            time.sleep(delay)

    def _mode(self, values: Iterable[Any], as_torch: Optional[bool] = None) -> _Mode:
        """Whether a call's results are torch tensors, and the device they go to."""
        flat: List[Any] = []
        for v in values:
            flat.extend(v.tensors() if _spmd.is_spmd(v) else (v,))
        for v in flat:
            t = v[0] if isinstance(v, tuple) and len(v) == 2 and isinstance(v[1], str) else v
            if _torch.is_tensor(t):
                device = t.device if t.device.type != "cpu" else None
                return (True if as_torch is None else as_torch), device
        return (self.as_torch if as_torch is None else as_torch), None

    @staticmethod
    def _wrap(value: Any, mode: _Mode) -> Any:
        if not mode[0] or isinstance(value, _mx.MxTensor):  # torch has no MX tensor: kept as it is
            return value
        if isinstance(value, list):  # a per-rank output (API.md 8)
            return [v if isinstance(v, _mx.MxTensor) else _torch.from_host(v, mode[1]) for v in value]
        return _torch.from_host(value, mode[1])

    def _decode_tensor_response(self, resp: requests.Response, mode: _Mode = (False, None)) -> Any:
        ctype = resp.headers.get("Content-Type", "")
        if ctype.startswith(SAFETENSORS):
            tensors, _ = st.decode(_read_body(resp))
            if len(tensors) != 1:
                raise TensordError(resp.status_code, "bad_response", "expected one tensor, got %d" % len(tensors))
            return self._wrap(next(iter(tensors.values())), mode)
        doc = _json_doc(resp)
        if isinstance(doc, dict) and "tensor" in doc and isinstance(doc["tensor"], dict):
            doc = doc["tensor"]
        return self._wrap(from_json_tensor(doc), mode)

    # -- tensors
    def put(self, name: str, array: Any, dtype: Any = None) -> bool:
        """Store a tensor under ``name``. Returns True if it was created, False if replaced."""
        if self.transport == "safetensors":
            resp = self._request("PUT", self._tensor_url(name), data=_safetensors_body({name: st.host_value(array, dtype)}),
                                 headers={"Content-Type": SAFETENSORS})
        else:
            resp = self._request("PUT", self._tensor_url(name), data=_json_body(_json_tensor(array, dtype)),
                                 headers={"Content-Type": JSON})
        return resp.status_code == 201

    def upload(self, tensors: Mapping[str, Any]) -> Any:
        """Store many tensors at once (``POST /v1/tensors:upload``)."""
        resp = self._request("POST", "/v1/tensors:upload", data=_safetensors_body(tensors),
                             headers={"Content-Type": SAFETENSORS})
        return _json_or_none(resp)

    def get(self, name: str, as_torch: Optional[bool] = None) -> Any:
        """Fetch a stored tensor: a numpy array (TensorData for bfloat16/float8), or
        a torch tensor with ``as_torch`` (default: the client's ``as_torch``)."""
        mode = (self.as_torch if as_torch is None else as_torch, None)
        if self.transport == "safetensors":
            resp = self._request("GET", self._tensor_url(name), headers={"Accept": SAFETENSORS}, stream=True)
        else:
            # b64: bit-exact, a third the size of numeric JSON, decoded by binascii
            resp = self._request("GET", self._tensor_url(name) + "?encoding=b64", headers={"Accept": JSON},
                                 stream=True)
        return self._decode_tensor_response(resp, mode)

    def head(self, name: str) -> Tuple[Optional[str], List[int]]:
        """Return ``(dtype, shape)`` of a stored tensor without fetching it."""
        resp = self._request("HEAD", self._tensor_url(name))
        return resp.headers.get("X-Tensor-Dtype"), parse_shape_header(resp.headers.get("X-Tensor-Shape", ""))

    def delete(self, name: str) -> None:
        self._request("DELETE", self._tensor_url(name))

    def list(self, prefix: str = "") -> List[Dict[str, Any]]:
        """List stored tensors: a list of ``{name, dtype, shape, bytes}``."""
        resp = self._request("GET", "/v1/tensors", params={"prefix": prefix} if prefix else None)
        doc = resp.json()
        if isinstance(doc, dict):
            for key in ("tensors", "items", "data"):
                if isinstance(doc.get(key), list):
                    doc = doc[key]
                    break
        if not isinstance(doc, list):
            raise TensordError(resp.status_code, "bad_response", "the tensor list is not a JSON list")
        return doc

    def checkpoint(self) -> Any:
        return _json_or_none(self._request("POST", "/v1/checkpoint"))

    # -- programs
    def _encode_inputs(self, req: Dict[str, Any], inputs: Optional[Mapping[str, Any]]) -> Tuple[Any, Dict[str, str]]:
        """The body and headers of a request whose JSON part is ``req`` and whose inputs are ``inputs``.

        Safetensors: plain inputs are the file's tensors and the request is
        ``__metadata__["request"]``; ``per_rank`` / ``shard`` inputs (API.md 8)
        have no place among a file's tensors, so they travel inside that
        request as JSON tensors (base64). JSON: every input is a JSON tensor.
        """
        inputs = inputs or {}
        plain = {k: v for k, v in inputs.items() if not _spmd.is_spmd(v)}
        spread = {k: v.to_json(to_json_tensor) for k, v in inputs.items() if _spmd.is_spmd(v)}
        if self.transport == "safetensors":
            if spread:
                req = dict(req, inputs=spread)
            body = _safetensors_body(plain, metadata={"request": json.dumps(req)})
            return body, {"Content-Type": SAFETENSORS, "Accept": SAFETENSORS}
        enc: Dict[str, Any] = {k: _json_tensor(v) for k, v in plain.items()}
        enc.update(spread)
        req = dict(req, inputs={k: enc[k] for k in inputs})  # the caller's order
        return _json_body(req), {"Content-Type": JSON, "Accept": JSON}

    def _job_body(self, program: Any, inputs: Optional[Mapping[str, Any]], fields: Dict[str, Any]
                  ) -> Tuple[Any, Dict[str, str]]:
        """The body and headers of a /v1/run or /v1/jobs request."""
        if hasattr(program, "build"):
            program = program.build()
        req = {"program": program}
        req.update(fields)
        return self._encode_inputs(req, inputs)

    @staticmethod
    def _run_fields(store: Any, return_: Any, deadline_ms: Any, priority: Any, extra: Dict[str, Any],
                    ranks: Optional[Ranks] = None) -> Dict[str, Any]:
        fields: Dict[str, Any] = {}
        if ranks is not None:
            fields["ranks"] = _ranks_field(ranks)
        if store is not None:
            fields["store"] = store
        if return_ is not None:
            fields["return"] = list(return_)
        if deadline_ms is not None:
            fields["deadline_ms"] = int(deadline_ms)
        if priority is not None:
            fields["priority"] = priority
        fields.update(extra)
        return fields

    def run(self, program: Any, inputs: Optional[Mapping[str, Any]] = None, store: Optional[Mapping[str, str]] = None,
            return_: Optional[Sequence[str]] = None, deadline_ms: Optional[int] = None, priority: Optional[int] = None,
            ranks: Optional[Ranks] = None, **extra: Any) -> Dict[str, Any]:
        """Run a program (``POST /v1/run``) and return ``{name: array}``.

        ``program`` is a program dict or a ProgramBuilder. ``inputs`` maps
        program input names to arrays (numpy, torch, TensorData, or
        (array, dtype) tuples). ``return_`` is the API's ``return`` list;
        ``extra`` goes into the request as it is. Results are torch tensors
        when an input is one (on its device) or the client has ``as_torch``.
        The job description is kept in ``self.last_job``.

        ``ranks`` (API.md 8) runs the program SPMD on every rank of a server
        started with ``--ranks R``: an int for the whole world, a list of
        ranks for a subgroup in that order. Inputs may then be
        :func:`tensord.per_rank` or :func:`tensord.shard` (a plain tensor is
        replicated). A replicated output comes back as one value; an output
        that differs across ranks as a list, in the group's order.
        """
        fields = self._run_fields(store, return_, deadline_ms, priority, extra, ranks)
        body, headers = self._job_body(program, inputs, fields)
        resp = self._request("POST", "/v1/run", data=body, headers=headers, deadline_ms=deadline_ms, stream=True)
        return self._decode_run_response(resp, self._mode((inputs or {}).values()))

    def submit(self, program: Any, inputs: Optional[Mapping[str, Any]] = None, store: Optional[Mapping[str, str]] = None,
               return_: Optional[Sequence[str]] = None, deadline_ms: Optional[int] = None,
               priority: Optional[int] = None, ranks: Optional[Ranks] = None, **extra: Any) -> "Job":
        """Submit a program as a job (``POST /v1/jobs``) and return its :class:`Job` at once.

        Takes what :meth:`run` takes (``ranks`` and SPMD inputs included);
        ``job.result()`` gives what ``run`` would have returned.
        """
        fields = self._run_fields(store, return_, deadline_ms, priority, extra, ranks)
        body, headers = self._job_body(program, inputs, fields)
        headers["Accept"] = JSON
        resp = self._request("POST", "/v1/jobs", data=body, headers=headers)
        doc = resp.json()
        return Job(self, doc["id"], self._mode((inputs or {}).values()), doc)

    def job(self, job_id: str) -> "Job":
        """A :class:`Job` handle for a job submitted earlier (by any client of the tenant)."""
        job = Job(self, job_id, self._mode(()))
        job.status()
        return job

    # -- graphs (API.md 4.3)
    def program(self) -> Any:
        """A small program builder (``tensord.program.ProgramBuilder``)."""
        return ProgramBuilder()

    def capture(self, program: Any, inputs_spec: Optional[Mapping[str, Any]] = None, pool: Any = None,
                name: Optional[str] = None, ranks: Optional[Ranks] = None) -> "Graph":
        """Capture a program once (``POST /v1/graphs``); returns a :class:`Graph`.

        ``program`` is a program dict or a ProgramBuilder; ``inputs_spec`` maps
        input names to ``{"dtype", "shape"}``, ``(dtype, shape)`` or an example
        tensor; ``pool`` is a Graph (or graph id) whose memory pool to share;
        ``name`` names the graph (its KServe model name). ``ranks`` (API.md 8)
        captures it SPMD, as :meth:`run` runs: an int for the whole world, a
        list for a subgroup; an input whose shape differs across ranks is
        specified as ``tensord.per_rank([spec0, spec1, ...])``, and its replays
        take :func:`tensord.per_rank` / :func:`tensord.shard` inputs and answer
        as ``run(..., ranks=)`` does. Use it as a context manager to delete
        the graph when done::

            with c.capture(prog) as g:
                y = g.replay(x=x)["y"]
        """
        if hasattr(program, "build"):
            program = program.build()
        req: Dict[str, Any] = {"program": program}
        if inputs_spec is not None:
            req["inputs"] = {k: _spec_of(v) for k, v in inputs_spec.items()}
        if pool is not None:
            req["pool"] = pool.id if hasattr(pool, "id") else pool
        if name is not None:
            req["name"] = name
        if ranks is not None:
            req["ranks"] = _ranks_field(ranks)
        resp = self._request("POST", "/v1/graphs", data=json.dumps(req), headers={"Content-Type": JSON})
        return Graph(self, _json_object(resp))

    def graph(self, graph_id: str) -> "Graph":
        """A :class:`Graph` handle for a graph captured earlier (by this or
        another client of the tenant): ``GET /v1/graphs/{id}``."""
        return Graph(self, _json_object(self._request("GET", "/v1/graphs/" + graph_id)))

    def _graph_replay(self, graph_id: str, inputs: Mapping[str, Any], return_: Optional[Sequence[str]] = None,
                      store: Optional[Mapping[str, str]] = None, as_torch: Optional[bool] = None) -> Dict[str, Any]:
        req: Dict[str, Any] = {}
        if store is not None:
            req["store"] = store
        if return_ is not None:
            req["return"] = list(return_)
        path = "/v1/graphs/%s/replay" % graph_id
        body, headers = self._encode_inputs(req, inputs)
        resp = self._request("POST", path, data=body, headers=headers, stream=True)
        return self._decode_run_response(resp, self._mode(inputs.values(), as_torch))

    def _decode_run_response(self, resp: requests.Response, mode: _Mode = (False, None)) -> Dict[str, Any]:
        ctype = resp.headers.get("Content-Type", "")
        tensors: Dict[str, Any] = {}
        if ctype.startswith(SAFETENSORS):
            tensors, meta = st.decode(_read_body(resp))
            doc = meta.get("response", "{}")
            doc = json.loads(doc) if isinstance(doc, str) else doc
        else:
            doc = _json_doc(resp)
        outputs = _collect_outputs(doc.get("outputs") or {}, tensors)
        self.last_job = doc.get("job")
        return {k: self._wrap(v, mode) for k, v in outputs.items()}

    def eigh(self, a: Any, UPLO: str = "L") -> EighResult:
        """Batched Hermitian eigendecomposition, like ``torch.linalg.eigh``:
        ``(eigenvalues, eigenvectors)`` (a named tuple), ascending eigenvalues,
        orthonormal eigenvectors as columns."""
        out = self.run(_single_op_program("linalg.eigh", a, {"UPLO": UPLO}, ["w", "v"]), inputs={"a": a})
        return EighResult(out["w"], out["v"])

    def eigvalsh(self, a: Any, UPLO: str = "L") -> Any:
        out = self.run(_single_op_program("linalg.eigvalsh", a, {"UPLO": UPLO}, ["w"]), inputs={"a": a})
        return out["w"]

    # -- optimizers
    def optimizer(self, kind: str, params: Union[str, Sequence[str]], state: Optional[str] = None,
                  **hyper: Any) -> "Optimizer":
        """A server-side optimizer over stored parameters (API.md section 6).

        ``kind`` is ``"sgd"``, ``"adam"``, ``"adamw"``, ``"adagrad"`` or
        ``"muon"``; ``params`` lists stored tensor names; ``hyper`` takes
        torch.optim's keyword arguments (``lr``, ``betas``, ``momentum``,
        ``weight_decay``, ``amsgrad``, ``nesterov``, ...; defaults are
        PyTorch's). State lives in stored tensors under ``state`` (default: a
        fresh ``optim/<kind>-<id>``), named ``<state>/<param>/<key>``::

            opt = c.optimizer("adamw", params=["w1", "w2"], lr=1e-3)
            opt.step([g1, g2])        # numpy arrays, torch tensors, or stored names
            opt.state()["w1"]["exp_avg"]
        """
        return Optimizer(self, kind, params, state=state, **hyper)

    # -- service
    def info(self) -> Dict[str, Any]:
        return _json_object(self._request("GET", "/v1/info"))

    def ops(self) -> Dict[str, Any]:
        """``GET /v1/ops``: ``{"ops": [{"name", "signature", "doc", "dtypes", "dtype_note", "params", "outputs",
        "in_place", "backends", "subprograms"}, ...]}``; ``dtypes`` lists dtype names, and the control-flow ops
        (``cond``, ``while_loop``, ``scan``, ``map``, ``associative_scan``) are listed with their ``subprograms``.
        """
        return _json_object(self._request("GET", "/v1/ops"))

    def health(self) -> bool:
        """True when ``/healthz`` answers 200 (raises TensordError otherwise; no retries)."""
        self._request("GET", "/healthz", retries=0)
        return True

    def ready(self) -> bool:
        """True when ``/readyz`` answers 200 (raises Unavailable while draining; no retries)."""
        self._request("GET", "/readyz", retries=0)
        return True

    def metrics(self) -> str:
        return self._request("GET", "/metrics").text

    def trace(self, last: Optional[int] = None) -> Any:
        """Chrome trace-event JSON of recent requests, jobs and ops (``GET /v1/trace``)."""
        params = {} if last is None else {"last": int(last)}
        return self._request("GET", "/v1/trace", params=params).json()

    def flight_recorder(self, rank: Optional[int] = None) -> Dict[str, Any]:
        """The collectives' flight recorder (``GET /v1/flight-recorder``, API.md 8), parsed.

        Without ``rank``: ``{"ranks": {"0": dump, ...}}`` for the server's local
        ranks; with it, that rank's dump (PyTorch's FlightRecorder layout:
        ``version``, ``pg_config``, ``pg_status``, ``entries`` with
        ``collective_seq_id``, ``profiling_name``, ``state``, ...). A rank the
        server does not have raises ``NotFound``.
        """
        params = None if rank is None else {"rank": int(rank)}
        return _json_object(self._request("GET", "/v1/flight-recorder", params=params))

    def _stream_connect(self, streams: Sequence[str], interval_ms: int, timeout: Optional[float]) -> Any:
        """A WebSocket on ``/v1/stream`` whose subscription the server has acknowledged."""
        try:
            import websocket  # only the stream needs it
        except ImportError as e:
            raise ImportError("the live stream needs websocket-client, a dependency of tensord: "
                              "pip install 'websocket-client>=1.2' (Debian: python3-websocket)") from e
        url = "ws" + self.url[len("http"):] + "/v1/stream"
        header = ["Authorization: Bearer " + self.token] if self.token else []
        try:
            ws = websocket.create_connection(url, header=header, timeout=timeout)
        except websocket.WebSocketBadStatusException as e:
            code = "unauthenticated" if e.status_code == 401 else "stream_refused"
            raise error_class(code, e.status_code)(e.status_code, code, str(e)) from e
        except (OSError, websocket.WebSocketException) as e:
            raise TransportError(0, "connection_error", "stream: %s" % e) from e
        try:
            ws.send(json.dumps({"subscribe": list(streams), "interval_ms": int(interval_ms)}))
            while True:
                text = ws.recv()
                if not text:
                    raise TransportError(0, "connection_error", "the server closed the stream")
                ev = json.loads(text)
                if ev.get("type") == "subscribed":
                    return ws
                if ev.get("type") == "error":
                    raise error_from_body(400, ev.get("error", {}))
        except BaseException:
            ws.close()
            raise

    def stream(self, streams: Sequence[str] = ("metrics", "jobs"), interval_ms: int = 1000,
               timeout: Optional[float] = None) -> Iterator[Dict[str, Any]]:
        """Live events from ``GET /v1/stream`` (a WebSocket), as dicts.

        >>> for ev in c.stream(["jobs"]):
        ...     print(ev["id"], ev["state"])

        Yields ``{"type": "metrics", ...}`` snapshots every ``interval_ms`` and
        ``{"type": "job", ...}`` events; the ``subscribed`` acknowledgement is
        skipped. A server ``error`` message raises TensordError. Needs
        websocket-client (Debian: python3-websocket). ``timeout`` bounds each
        wait for a message (None: forever).
        """
        ws = self._stream_connect(streams, interval_ms, timeout)
        try:
            while True:
                text = ws.recv()
                if not text:
                    return  # the server closed the stream
                ev = json.loads(text)
                kind = ev.get("type")
                if kind == "subscribed":
                    continue
                if kind == "error":
                    raise error_from_body(400, ev.get("error", {}))
                yield ev
        finally:
            ws.close()


class Optimizer:
    """A fused optimizer step that runs on the server (see :meth:`Client.optimizer`).

    Each :meth:`step` sends only the gradients; parameters and state stay
    server-side and are updated in place, all or nothing.
    """

    KINDS = ("sgd", "adam", "adamw", "adagrad", "muon")

    def __init__(self, client: Client, kind: str, params: Union[str, Sequence[str]], state: Optional[str] = None,
                 **hyper: Any) -> None:
        kind = str(kind).lower()
        if kind not in self.KINDS:
            raise ValueError("optimizer kind must be one of %s, got %r" % (", ".join(self.KINDS), kind))
        if isinstance(params, str):
            params = [params]
        self.client = client
        self.kind = kind
        self.op = "optim." + kind
        self.params = [p[len("$stored/"):] if p.startswith("$stored/") else p for p in params]
        self.hyper = dict(hyper)
        self.state_prefix = state or "optim/%s-%s" % (kind, uuid.uuid4().hex[:12])
        self._dtypes: Dict[str, Optional[str]] = {}

    def _dtype(self, name: str) -> Optional[str]:
        if name not in self._dtypes:
            self._dtypes[name] = self.client.head(name)[0]
        return self._dtypes[name]

    def program(self, grad_refs: Sequence[str], amp: Sequence[str] = (), reduce: Sequence[str] = (),
                reduce_op: str = "avg") -> Dict[str, Any]:
        """The program of a step (``grad_refs``: value names or ``$stored/...``):
        a ``dist.all_reduce(op=reduce_op)`` of each value named in ``reduce``
        (per-rank gradients of a data-parallel step), then the optimizer node."""
        kwargs = dict(self.hyper)
        if "betas" in kwargs:
            kwargs["betas"] = [float(b) for b in kwargs["betas"]]
        if "ns_coefficients" in kwargs:
            kwargs["ns_coefficients"] = [float(b) for b in kwargs["ns_coefficients"]]
        kwargs["state"] = self.state_prefix
        for name in amp:
            kwargs[name] = name
        nodes: List[Dict[str, Any]] = []
        refs = list(grad_refs)
        for i, ref in enumerate(refs):
            if ref in reduce:
                nodes.append({"id": "reduce_" + ref, "op": "dist.all_reduce", "args": [ref],
                              "kwargs": {"op": reduce_op}, "outputs": [ref + "_reduced"]})
                refs[i] = ref + "_reduced"
        nodes.append({"id": "step", "op": self.op, "args": [["$stored/" + p for p in self.params], refs],
                      "kwargs": kwargs, "outputs": []})
        return {"nodes": nodes, "outputs": []}

    def step(self, grads: Any, grad_scale: Any = None, found_inf: Any = None, ranks: Optional[Ranks] = None,
             reduce: str = "avg") -> None:
        """One step. ``grads``: a list aligned with ``params`` (or a dict by
        parameter name) of numpy arrays, torch tensors or TensorData (sent as
        the parameter's dtype) or stored tensor names. ``grad_scale`` /
        ``found_inf``: AMP scalars as in PyTorch's fused optimizers
        (found_inf != 0 skips the step).

        A data-parallel step (API.md 8): with ``ranks`` (as for
        :meth:`Client.run`) a gradient may be :func:`tensord.per_rank` (or
        :func:`tensord.shard`); it is all-reduced with ``reduce`` (``"avg"``,
        ``"sum"``, ...) across the group, then the step runs once on the
        stored parameters, all in one request::

            opt.step([tensord.per_rank([g_rank0, g_rank1])], ranks=2)
        """
        if isinstance(grads, dict):
            grads = [grads[p] for p in self.params]
        grads = list(grads)
        if len(grads) != len(self.params):
            raise ValueError("got %d grads for %d params" % (len(grads), len(self.params)))
        inputs: Dict[str, Any] = {}
        refs = []
        spread = []
        for i, (p, g) in enumerate(zip(self.params, grads)):
            if isinstance(g, str):
                refs.append(g if g.startswith("$stored/") else "$stored/" + g)
                continue
            name = "g%d" % i
            want = self._dtype(p)

            def as_param(v: Any, want: Optional[str] = want) -> Any:
                return st.host_value(v) if dtype_name_of(v) == want else st.host_value(v, want)
            if _spmd.is_spmd(g):
                if ranks is None:
                    raise ValueError("a per_rank or shard gradient needs ranks= (a data-parallel step)")
                inputs[name] = g.map(as_param)
                spread.append(name)
            else:
                inputs[name] = as_param(g)
            refs.append(name)
        amp = []
        for name, v in (("grad_scale", grad_scale), ("found_inf", found_inf)):
            if v is not None:
                scalar = st.host_value(v, "float32")
                assert isinstance(scalar, np.ndarray), "float32 is a numpy dtype"
                inputs[name] = scalar.reshape(())
                amp.append(name)
        self.client.run(self.program(refs, amp, spread, reduce), inputs=inputs, ranks=ranks)

    def state(self) -> Dict[str, Dict[str, Any]]:
        """``{param: {key: array}}`` of this optimizer's stored state."""
        prefix = self.state_prefix + "/"
        out: Dict[str, Dict[str, Any]] = {}
        for item in self.client.list(prefix):
            rest = item["name"][len(prefix):]
            param, _, key = rest.rpartition("/")
            out.setdefault(param, {})[key] = self.client.get(item["name"])
        return out


def _single_op_program(op: str, a: Any, kwargs: Dict[str, Any], outputs: List[str]) -> Dict[str, Any]:
    return {
        "inputs": {"a": {"dtype": dtype_name_of(a), "shape": shape_of(a)}},
        "nodes": [{"id": "n", "op": op, "args": ["a"], "kwargs": kwargs, "outputs": outputs}],
        "outputs": outputs,
    }


def _json_object(resp: requests.Response) -> Dict[str, Any]:
    """A JSON object answer (anything else: ``bad_response``)."""
    doc = resp.json()
    if not isinstance(doc, dict):
        raise TensordError(resp.status_code, "bad_response", "expected a JSON object, got %s" % type(doc).__name__)
    return doc


def _json_or_none(resp: requests.Response) -> Any:
    if resp.content:
        try:
            return resp.json()
        except ValueError:
            return None
    return None


def parse_shape_header(text: str) -> List[int]:
    """Parse ``X-Tensor-Shape`` ("[2,3]", "2,3", "2x3" or "" for a scalar)."""
    text = text.strip().strip("[]()")
    if not text:
        return []
    for sep in (",", "x", " "):
        if sep in text:
            return [int(p) for p in text.split(sep) if p.strip()]
    return [int(text)]

