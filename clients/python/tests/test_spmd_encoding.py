"""How the client encodes SPMD requests and groups per-rank answers (API.md 8),
no server needed: per_rank / shard in JSON and safetensors request bodies,
local refusals of what is not a tensor list, per-rank outputs regrouped
from a safetensors answer's ``<name>/<i>`` tensors."""

import json

import numpy as np
import pytest

import tensord

# y differs per rank, z (an all_reduce) is replicated
MUL_AND_SUM = {"nodes": [{"id": "m", "op": "mul", "args": ["x", 2.0], "outputs": ["y"]},
                         {"id": "s", "op": "dist.all_reduce", "args": ["x"], "kwargs": {"op": "sum"},
                          "outputs": ["z"]}],
               "outputs": ["y", "z"]}


def test_helpers_refuse_what_is_not_a_tensor_list_locally():
    with pytest.raises(TypeError):
        tensord.per_rank(np.ones((2, 2), np.float32))  # a list of tensors, not an array to iterate
    with pytest.raises(TypeError):
        tensord.shard(np.ones(2), dim=1.5)
    c = tensord.Client("http://127.0.0.1:9")  # nothing is sent: the request is refused before
    for bad in (True, "2", [0, "1"], 1.0):
        with pytest.raises(TypeError):
            c.run(MUL_AND_SUM, ranks=bad, inputs={"x": np.ones(2)})


def test_request_encoding_of_spmd_inputs():
    """per_rank / shard travel as API.md 8's JSON forms: in the JSON body, or
    inside the safetensors request (the file holds only plain inputs)."""
    a, b, w = np.ones(2, np.float32), np.zeros(2, np.float32), np.arange(6, dtype=np.int32).reshape(3, 2)
    inputs = {"x": tensord.per_rank([a, b]), "w": tensord.shard(w, dim=1), "p": np.float64(2.0)}
    cj = tensord.Client("http://127.0.0.1:9", transport="json")
    body, headers = cj._job_body(MUL_AND_SUM, inputs, cj._run_fields(None, None, None, None, {}, [1, 0]))
    req = json.loads(body)
    assert headers["Content-Type"] == "application/json" and req["ranks"] == [1, 0]
    assert list(req["inputs"]) == ["x", "w", "p"]
    assert [tensord.from_json_tensor(t).tolist() for t in req["inputs"]["x"]["per_rank"]] == [[1, 1], [0, 0]]
    assert req["inputs"]["w"]["dim"] == 1 and tensord.from_json_tensor(req["inputs"]["w"]["shard"]).tolist() == \
        w.tolist()
    cs = tensord.Client("http://127.0.0.1:9")
    body, headers = cs._job_body(MUL_AND_SUM, inputs, cs._run_fields(None, None, None, None, {}, 2))
    tensors, meta = tensord.safetensors.decode(bytes(body))
    assert list(tensors) == ["p"]
    req = json.loads(meta["request"])
    assert req["ranks"] == 2 and set(req["inputs"]) == {"x", "w"}
    assert req["inputs"]["w"]["dim"] == 1 and len(req["inputs"]["x"]["per_rank"]) == 2


def test_safetensors_reply_decoding_groups_rank_parts():
    from tensord._wire import _collect_outputs
    parts = {"y/0": np.ones(2), "y/1": np.zeros(2), "z": np.full(2, 5.0)}
    described = {"y": {"per_rank": [{"dtype": "float64", "shape": [2]}] * 2}, "z": {"dtype": "float64", "shape": [2]}}
    out = _collect_outputs(described, parts)
    assert list(out) == ["y", "z"] and isinstance(out["y"], list) and out["y"][1].tolist() == [0, 0]
    # the JSON form
    header = json.dumps({"y": {"per_rank": [{"dtype": "float32", "shape": [1], "data": [1]},
                                            {"dtype": "float32", "shape": [1], "data": [2]}]},
                         "z": {"dtype": "float32", "shape": [1], "data": [3], "replicated": True}})
    out = _collect_outputs(json.loads(header), {})
    assert [v.tolist() for v in out["y"]] == [[1], [2]] and out["z"].tolist() == [3]
