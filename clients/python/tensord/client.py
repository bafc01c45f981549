"""HTTP client for tensord (API.md).

Only numpy and requests are needed.  Arrays travel as safetensors by default
(``transport="safetensors"``); ``transport="json"`` sends JSON tensors with
base64 payloads (API.md 3.1).  See :mod:`tensord.safetensors` for how dtypes
numpy lacks (bfloat16, float8) are represented (:class:`TensorData`).
"""

import base64
import json
import math
import urllib.parse
import uuid

import numpy as np
import requests

from . import safetensors as st
from .errors import TensordError
from .safetensors import TensorData

SAFETENSORS = "application/vnd.safetensors"
JSON = "application/json"


# ---------------------------------------------------------------- JSON tensors

def to_json_tensor(value, dtype=None, b64=True):
    """Encode a tensor as an API.md 3.1 JSON tensor (``b64`` or flat ``data``)."""
    name, shape, raw = st.convert(value, dtype)
    if b64:
        return {"dtype": name, "shape": shape, "b64": base64.b64encode(raw).decode("ascii")}
    arr = st.from_bytes(raw, name, shape)
    if isinstance(arr, TensorData):
        flat = arr.to_float32().reshape(-1).astype(np.float64)
    else:
        flat = arr.reshape(-1)
    return {"dtype": name, "shape": shape, "data": [_json_scalar(x) for x in flat]}


def _json_scalar(x):
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


def _flatten(data):
    if isinstance(data, list):
        # a complex element is [re, im]: only flatten lists of lists / scalars
        out = []
        for d in data:
            if isinstance(d, list):
                out.extend(_flatten(d))
            else:
                out.append(d)
        return out
    return [data]


def _num(x):
    if isinstance(x, str):
        return {"nan": math.nan, "inf": math.inf, "-inf": -math.inf, "+inf": math.inf}[x.lower()]
    return x


def from_json_tensor(obj):
    """Decode an API.md 3.1 JSON tensor into a numpy array (or TensorData)."""
    name = st.canonical_dtype(obj["dtype"])
    shape = [int(s) for s in obj.get("shape", [])]
    if "b64" in obj:
        return st.from_bytes(base64.b64decode(obj["b64"]), name, shape)
    data = obj.get("data")
    storage = st.DTYPES[name][1]
    if name in ("complex64", "complex128"):
        def pairs(d):
            if isinstance(d, list) and len(d) == 2 and not isinstance(d[0], list):
                return [complex(_num(d[0]), _num(d[1]))]
            out = []
            for e in (d if isinstance(d, list) else [d]):
                out.extend(pairs(e))
            return out
        flat = pairs(data)
        arr = np.array(flat, dtype=storage)
    else:
        flat = [_num(v) for v in _flatten(data)]
        if name in st.NARROW:
            return TensorData.from_float(np.array(flat, dtype=np.float64).reshape(shape), name)
        if name == "bool":
            arr = np.array(flat, dtype=np.bool_)
        elif storage.kind in "iu":
            arr = np.array([int(v) for v in flat], dtype=storage)
        else:
            arr = np.array(flat, dtype=np.float64).astype(storage)
    return arr.reshape(shape)


def dtype_name_of(value):
    if isinstance(value, TensorData):
        return value.dtype_name
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[1], str):
        return st.canonical_dtype(value[1])
    return st.canonical_dtype(np.asarray(value).dtype)


def shape_of(value):
    if isinstance(value, TensorData):
        return list(value.shape)
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[1], str):
        return list(np.shape(value[0]))
    return list(np.shape(value))


# ---------------------------------------------------------------- client

class Client:
    """A tensord client.

    >>> c = Client("http://127.0.0.1:8080")
    >>> c.put("x", np.ones((2, 2), np.float32))
    >>> c.get("x")
    """

    def __init__(self, url="http://127.0.0.1:8080", token=None, timeout=60, transport="safetensors"):
        if transport not in ("safetensors", "json"):
            raise ValueError("transport must be 'safetensors' or 'json'")
        self.url = url.rstrip("/")
        self.token = token
        self.timeout = timeout
        self.transport = transport
        self.session = requests.Session()
        if token:
            self.session.headers["Authorization"] = "Bearer " + token
        self.last_job = None
        self.last_request_id = None

    def close(self):
        self.session.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- plumbing
    def _tensor_url(self, name):
        return self.url + "/v1/tensors/" + urllib.parse.quote(name, safe="/")

    def _request(self, method, path_or_url, **kw):
        url = path_or_url if path_or_url.startswith("http") else self.url + path_or_url
        kw.setdefault("timeout", self.timeout)
        try:
            resp = self.session.request(method, url, **kw)
        except requests.RequestException as e:
            raise TensordError(0, "connection_error", str(e)) from e
        self.last_request_id = resp.headers.get("X-Request-Id")
        if resp.status_code >= 400:
            raise TensordError.from_response(resp)
        return resp

    def _decode_tensor_response(self, resp):
        ctype = resp.headers.get("Content-Type", "")
        if ctype.startswith(SAFETENSORS):
            tensors, _ = st.decode(resp.content)
            if len(tensors) != 1:
                raise TensordError(resp.status_code, "bad_response", "expected one tensor, got %d" % len(tensors))
            return next(iter(tensors.values()))
        doc = resp.json()
        if isinstance(doc, dict) and "tensor" in doc and isinstance(doc["tensor"], dict):
            doc = doc["tensor"]
        return from_json_tensor(doc)

    # -- tensors
    def put(self, name, array, dtype=None):
        """Store a tensor under ``name``. Returns True if it was created, False if replaced."""
        if self.transport == "safetensors":
            body = st.encode({name: _convert_value(array, dtype)})
            resp = self._request("PUT", self._tensor_url(name), data=body,
                                 headers={"Content-Type": SAFETENSORS})
        else:
            body = json.dumps(to_json_tensor(array, dtype))
            resp = self._request("PUT", self._tensor_url(name), data=body,
                                 headers={"Content-Type": JSON})
        return resp.status_code == 201

    def upload(self, tensors):
        """Store many tensors at once (``POST /v1/tensors:upload``)."""
        body = st.encode({k: v for k, v in tensors.items()})
        resp = self._request("POST", "/v1/tensors:upload", data=body, headers={"Content-Type": SAFETENSORS})
        return _json_or_none(resp)

    def get(self, name):
        """Fetch a stored tensor: a numpy array, or a TensorData for bfloat16/float8."""
        accept = SAFETENSORS if self.transport == "safetensors" else JSON
        resp = self._request("GET", self._tensor_url(name), headers={"Accept": accept})
        return self._decode_tensor_response(resp)

    def head(self, name):
        """Return ``(dtype, shape)`` of a stored tensor without fetching it."""
        resp = self._request("HEAD", self._tensor_url(name))
        return resp.headers.get("X-Tensor-Dtype"), parse_shape_header(resp.headers.get("X-Tensor-Shape", ""))

    def delete(self, name):
        self._request("DELETE", self._tensor_url(name))

    def list(self, prefix=""):
        """List stored tensors: a list of ``{name, dtype, shape, bytes}``."""
        resp = self._request("GET", "/v1/tensors", params={"prefix": prefix} if prefix else None)
        doc = resp.json()
        if isinstance(doc, dict):
            for key in ("tensors", "items", "data"):
                if isinstance(doc.get(key), list):
                    return doc[key]
        return doc

    def checkpoint(self):
        return _json_or_none(self._request("POST", "/v1/checkpoint"))

    # -- programs
    def run(self, program, inputs=None, store=None, return_=None, deadline_ms=None, priority=None, **extra):
        """Run a program (``POST /v1/run``) and return ``{name: array}``.

        ``inputs`` maps program input names to arrays (or TensorData, or
        (array, dtype) tuples). ``return_`` is the API's ``return`` list. The
        job description of the run is kept in ``self.last_job``.
        """
        req = {"program": program}
        if store is not None:
            req["store"] = store
        if return_ is not None:
            req["return"] = list(return_)
        if deadline_ms is not None:
            req["deadline_ms"] = deadline_ms
        if priority is not None:
            req["priority"] = priority
        req.update(extra)
        inputs = inputs or {}
        if self.transport == "safetensors":
            body = st.encode({k: _convert_value(v) for k, v in inputs.items()},
                             metadata={"request": json.dumps(req)})
            resp = self._request("POST", "/v1/run", data=body,
                                 headers={"Content-Type": SAFETENSORS, "Accept": SAFETENSORS})
        else:
            req["inputs"] = {k: to_json_tensor(v) for k, v in inputs.items()}
            resp = self._request("POST", "/v1/run", data=json.dumps(req),
                                 headers={"Content-Type": JSON, "Accept": JSON})
        return self._decode_run_response(resp)

    # -- graphs (API.md 4.3)
    def program(self):
        """A small program builder (``tensord.program.ProgramBuilder``)."""
        from .program import ProgramBuilder
        return ProgramBuilder()

    def capture(self, program, inputs_spec=None, pool=None):
        """Capture a program once (``POST /v1/graphs``); returns a :class:`Graph`.

        ``program`` is a program dict or a ProgramBuilder; ``inputs_spec`` maps
        input names to ``{"dtype", "shape"}`` (or ``(dtype, shape)``); ``pool``
        is a Graph (or graph id) whose memory pool to share.
        """
        from .program import Graph
        if hasattr(program, "build"):
            program = program.build()
        req = {"program": program}
        if inputs_spec is not None:
            req["inputs"] = {k: (v if isinstance(v, dict) else {"dtype": v[0], "shape": list(v[1])})
                             for k, v in inputs_spec.items()}
        if pool is not None:
            req["pool"] = pool.id if hasattr(pool, "id") else pool
        resp = self._request("POST", "/v1/graphs", data=json.dumps(req), headers={"Content-Type": JSON})
        return Graph(self, resp.json())

    def graph(self, graph_id):
        """A :class:`Graph` handle for a graph captured earlier (by this or
        another client of the tenant): ``GET /v1/graphs/{id}``."""
        from .program import Graph
        return Graph(self, self._request("GET", "/v1/graphs/" + graph_id).json())

    def _graph_replay(self, graph_id, inputs, return_=None, store=None):
        req = {}
        if store is not None:
            req["store"] = store
        if return_ is not None:
            req["return"] = list(return_)
        path = "/v1/graphs/%s/replay" % graph_id
        if self.transport == "safetensors":
            body = st.encode({k: _convert_value(v) for k, v in inputs.items()},
                             metadata={"request": json.dumps(req)})
            resp = self._request("POST", path, data=body,
                                 headers={"Content-Type": SAFETENSORS, "Accept": SAFETENSORS})
        else:
            req["inputs"] = {k: to_json_tensor(v) for k, v in inputs.items()}
            resp = self._request("POST", path, data=json.dumps(req), headers={"Content-Type": JSON, "Accept": JSON})
        return self._decode_run_response(resp)

    def _decode_run_response(self, resp):
        ctype = resp.headers.get("Content-Type", "")
        outputs = {}
        if ctype.startswith(SAFETENSORS):
            tensors, meta = st.decode(resp.content)
            doc = meta.get("response", "{}")
            doc = json.loads(doc) if isinstance(doc, str) else doc
            outputs.update(tensors)
        else:
            doc = resp.json()
        for k, v in (doc.get("outputs") or {}).items():
            # in a safetensors reply "outputs" only describes the file's tensors
            if k not in outputs and isinstance(v, dict) and ("data" in v or "b64" in v):
                outputs[k] = from_json_tensor(v)
        self.last_job = doc.get("job")
        return outputs

    def eigh(self, a, UPLO="L"):
        """Batched Hermitian eigendecomposition, like ``torch.linalg.eigh``: returns (w, v)."""
        out = self.run(_single_op_program("linalg.eigh", a, {"UPLO": UPLO}, ["w", "v"]), inputs={"a": a})
        return out["w"], out["v"]

    def eigvalsh(self, a, UPLO="L"):
        out = self.run(_single_op_program("linalg.eigvalsh", a, {"UPLO": UPLO}, ["w"]), inputs={"a": a})
        return out["w"]

    # -- optimizers
    def optimizer(self, kind, params, state=None, **hyper):
        """A server-side optimizer over stored parameters (API.md section 6).

        ``kind`` is ``"sgd"``, ``"adam"``, ``"adamw"``, ``"adagrad"`` or
        ``"muon"``; ``params`` lists stored tensor names; ``hyper`` takes
        torch.optim's keyword arguments (``lr``, ``betas``, ``momentum``,
        ``weight_decay``, ``amsgrad``, ``nesterov``, ...; defaults are
        PyTorch's). State lives in stored tensors under ``state`` (default: a
        fresh ``optim/<kind>-<id>``), named ``<state>/<param>/<key>``::

            opt = c.optimizer("adamw", params=["w1", "w2"], lr=1e-3)
            opt.step([g1, g2])        # numpy arrays, or stored names
            opt.state()["w1"]["exp_avg"]
        """
        return Optimizer(self, kind, params, state=state, **hyper)

    # -- service
    def info(self):
        return self._request("GET", "/v1/info").json()

    def ops(self):
        return self._request("GET", "/v1/ops").json()

    def health(self):
        """True when ``/healthz`` answers 200 (raises TensordError otherwise)."""
        self._request("GET", "/healthz")
        return True

    def ready(self):
        self._request("GET", "/readyz")
        return True

    def metrics(self):
        return self._request("GET", "/metrics").text

    def trace(self, last=None):
        """Chrome trace-event JSON of recent requests, jobs and ops (``GET /v1/trace``)."""
        params = {} if last is None else {"last": int(last)}
        return self._request("GET", "/v1/trace", params=params).json()

    def stream(self, streams=("metrics", "jobs"), interval_ms=1000, timeout=None):
        """Live events from ``GET /v1/stream`` (a WebSocket), as dicts.

        >>> for ev in c.stream(["jobs"]):
        ...     print(ev["id"], ev["state"])

        Yields ``{"type": "metrics", ...}`` snapshots every ``interval_ms`` and
        ``{"type": "job", ...}`` events; the ``subscribed`` acknowledgement is
        skipped. A server ``error`` message raises TensordError. Needs
        websocket-client (Debian: python3-websocket). ``timeout`` bounds each
        wait for a message (None: forever).
        """
        import websocket  # only the stream needs it

        url = "ws" + self.url[len("http"):] + "/v1/stream"
        header = ["Authorization: Bearer " + self.token] if self.token else []
        try:
            ws = websocket.create_connection(url, header=header, timeout=timeout)
        except websocket.WebSocketBadStatusException as e:
            raise TensordError(e.status_code, "unauthenticated" if e.status_code == 401 else "stream_refused",
                               str(e)) from e
        try:
            ws.send(json.dumps({"subscribe": list(streams), "interval_ms": int(interval_ms)}))
            while True:
                text = ws.recv()
                if not text:
                    return  # the server closed the stream
                ev = json.loads(text)
                kind = ev.get("type")
                if kind == "subscribed":
                    continue
                if kind == "error":
                    err = ev.get("error", {})
                    raise TensordError(400, err.get("code", "bad_request"), err.get("message", ""))
                yield ev
        finally:
            ws.close()


class Optimizer:
    """A fused optimizer step that runs on the server (see :meth:`Client.optimizer`).

    Each :meth:`step` sends only the gradients; parameters and state stay
    server-side and are updated in place, all or nothing.
    """

    KINDS = ("sgd", "adam", "adamw", "adagrad", "muon")

    def __init__(self, client, kind, params, state=None, **hyper):
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
        self._dtypes = {}

    def _dtype(self, name):
        if name not in self._dtypes:
            self._dtypes[name] = self.client.head(name)[0]
        return self._dtypes[name]

    def program(self, grad_refs, amp=()):
        """The one-node program of a step (``grad_refs``: value names or ``$stored/...``)."""
        kwargs = dict(self.hyper)
        if "betas" in kwargs:
            kwargs["betas"] = [float(b) for b in kwargs["betas"]]
        if "ns_coefficients" in kwargs:
            kwargs["ns_coefficients"] = [float(b) for b in kwargs["ns_coefficients"]]
        kwargs["state"] = self.state_prefix
        for name in amp:
            kwargs[name] = name
        return {"nodes": [{"id": "step", "op": self.op,
                           "args": [["$stored/" + p for p in self.params], list(grad_refs)],
                           "kwargs": kwargs, "outputs": []}],
                "outputs": []}

    def step(self, grads, grad_scale=None, found_inf=None):
        """One step. ``grads``: a list aligned with ``params`` (or a dict by
        parameter name) of numpy arrays / TensorData (sent as the parameter's
        dtype) or stored tensor names. ``grad_scale`` / ``found_inf``: AMP
        scalars as in PyTorch's fused optimizers (found_inf != 0 skips the step)."""
        if isinstance(grads, dict):
            grads = [grads[p] for p in self.params]
        grads = list(grads)
        if len(grads) != len(self.params):
            raise ValueError("got %d grads for %d params" % (len(grads), len(self.params)))
        inputs, refs = {}, []
        for i, (p, g) in enumerate(zip(self.params, grads)):
            if isinstance(g, str):
                refs.append(g if g.startswith("$stored/") else "$stored/" + g)
                continue
            name = "g%d" % i
            want = self._dtype(p)
            inputs[name] = g if dtype_name_of(g) == want else _convert_value(g, want)
            refs.append(name)
        amp = []
        for name, v in (("grad_scale", grad_scale), ("found_inf", found_inf)):
            if v is not None:
                inputs[name] = np.asarray(v, dtype=np.float32).reshape(())
                amp.append(name)
        self.client.run(self.program(refs, amp), inputs=inputs)

    def state(self):
        """``{param: {key: array}}`` of this optimizer's stored state."""
        prefix = self.state_prefix + "/"
        out = {}
        for item in self.client.list(prefix):
            rest = item["name"][len(prefix):]
            param, _, key = rest.rpartition("/")
            out.setdefault(param, {})[key] = self.client.get(item["name"])
        return out


def _convert_value(value, dtype=None):
    """Normalize a value for the safetensors encoder."""
    if dtype is None:
        return value
    name, shape, raw = st.convert(value, dtype)
    return st.from_bytes(raw, name, shape)


def _single_op_program(op, a, kwargs, outputs):
    return {
        "inputs": {"a": {"dtype": dtype_name_of(a), "shape": shape_of(a)}},
        "nodes": [{"id": "n", "op": op, "args": ["a"], "kwargs": kwargs, "outputs": outputs}],
        "outputs": outputs,
    }


def _json_or_none(resp):
    if resp.content:
        try:
            return resp.json()
        except ValueError:
            return None
    return None


def parse_shape_header(text):
    """Parse ``X-Tensor-Shape`` ("[2,3]", "2,3", "2x3" or "" for a scalar)."""
    text = text.strip().strip("[]()")
    if not text:
        return []
    for sep in (",", "x", " "):
        if sep in text:
            return [int(p) for p in text.split(sep) if p.strip()]
    return [int(text)]
