"""The JSON transport against the real server: JSON tensors with base64
payloads through put, get, run and submit, large answers decoded as they
arrive (tensord/_jsonbody.py; its server-free tests are
clients/python/tests/test_jsonbody.py)."""

import numpy as np

import tensord


def test_json_get_and_run_answers_round_trip_through_the_fast_decoder(server):
    c = tensord.Client(server.url, transport="json")
    x = np.random.default_rng(3).standard_normal((64, 1024)).astype(np.float32)
    c.put("jb", x)
    np.testing.assert_array_equal(c.get("jb"), x)
    big = np.random.default_rng(4).standard_normal((1 << 21,)).astype(np.float32)  # 8 MiB: decoded as it arrives
    c.put("big", big)
    got = c.get("big")
    np.testing.assert_array_equal(got, big)
    got[0] = 1.0  # writable, like every array the client returns
    out = c.run({"inputs": {"a": {"dtype": "float32", "shape": [64, 1024]}},
                 "nodes": [{"id": "n", "op": "mul", "args": ["a", "a"], "outputs": ["y"]}], "outputs": ["y"]},
                inputs={"a": x})
    np.testing.assert_array_equal(out["y"], x * x)
    job = c.submit({"inputs": {"a": {"dtype": "float32", "shape": [64, 1024]}},
                    "nodes": [{"id": "n", "op": "add", "args": ["a", "a"], "outputs": ["y"]}], "outputs": ["y"]},
                   inputs={"a": x})
    np.testing.assert_array_equal(job.result()["y"], x + x)
