"""tensord: Python client for the tensord compute server (API.md section 12).

    import numpy as np, tensord
    c = tensord.Client("http://127.0.0.1:8080")
    c.put("x", np.eye(4, dtype=np.float32))
    w, v = c.eigh(np.eye(4, dtype=np.float32)[None])   # a named tuple (eigenvalues, eigenvectors)
    job = c.submit(program, inputs={"x": x})
    out = job.result()
    c.run(program, ranks=2, inputs={"x": tensord.per_rank([x0, x1]), "w": tensord.shard(w, dim=0)})

Needs numpy, requests and websocket-client (the live stream); uses torch
(tensors in and out: the ``tensord[torch]`` extra) and tqdm (progress bars:
``tensord[progress]``) when they are installed, and imports neither itself.
bfloat16 / float8 values are :class:`TensorData` (raw bits + dtype name)
when they do not come back as torch tensors; see :mod:`tensord.dtypes`.
"""

from . import dtypes, mx, safetensors
from ._wire import from_json_tensor
from .client import DEADLINE_MARGIN_S, Client, EighResult, Optimizer, Ranks, parse_shape_header, to_json_tensor
from .dtypes import TensorData, dtype_name
from .errors import (ERRORS, BadRequest, Cancelled, ClientTimeout, Conflict, DeadlineExceeded, DtypeMismatch,
                     Forbidden, Internal, InvalidArgument, InvalidProgram, NotFound, NumericalError, PayloadTooLarge,
                     QueueFull, QuotaExceeded, ShapeMismatch, TensordError, TransportError, Unauthenticated,
                     Unavailable, UnknownOp)
from .jobs import TERMINAL, Job
from .mx import MxTensor
from .graph import Graph
from .program import ProgramBuilder, Value
from .safetensors import SafetensorsError
from .spmd import PerRank, Shard, per_rank, shard

__version__ = "0.3.0"

__all__ = [
    "Client", "Job", "Graph", "Optimizer", "per_rank", "shard", "PerRank", "Shard", "Ranks",
    "EighResult", "ProgramBuilder", "Value", "TensorData", "MxTensor", "mx",
    "SafetensorsError", "safetensors", "dtypes", "dtype_name", "from_json_tensor", "to_json_tensor",
    "parse_shape_header", "TERMINAL", "DEADLINE_MARGIN_S", "ERRORS",
    "TensordError", "TransportError", "ClientTimeout", "BadRequest", "InvalidProgram", "Unauthenticated",
    "Forbidden", "NotFound", "UnknownOp", "Conflict", "PayloadTooLarge", "ShapeMismatch", "DtypeMismatch",
    "InvalidArgument", "NumericalError", "QuotaExceeded", "QueueFull", "Cancelled", "Internal", "Unavailable",
    "DeadlineExceeded",
]
