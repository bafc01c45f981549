"""tensord: Python client for the tensord compute server.

    from tensord import Client
    c = Client("http://127.0.0.1:8080")
    c.put("x", np.eye(4, dtype=np.float32))
    w, v = c.eigh(np.eye(4, dtype=np.float32)[None])

Dependencies: numpy and requests.  bfloat16 / float8 tensors are
:class:`TensorData` (raw bits + dtype name); see ``tensord.safetensors``.
"""

from .client import Client, Optimizer, from_json_tensor, to_json_tensor, parse_shape_header
from .errors import TensordError
from .safetensors import TensorData, SafetensorsError
from . import safetensors
from .program import ProgramBuilder, Graph, Value

__version__ = "0.1.0"

__all__ = ["Client", "Optimizer", "TensordError", "TensorData", "SafetensorsError", "safetensors",
           "from_json_tensor", "to_json_tensor", "parse_shape_header", "ProgramBuilder", "Graph", "Value"]
