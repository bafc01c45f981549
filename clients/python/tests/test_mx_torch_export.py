"""torch.export: a module holding an MX weight, exported with
torch.export.save and read back with torch.export.load, its constants
turned into a tensord MxTensor and run by a real tensord server.

The codes and e8m0 scales are torchao's own (MXTensor.to_mx of a random
weight). Two ways of holding them: plain buffers (uint8 codes, a
torch.float8_e8m0fnu scale), which the .pt2 archive stores as raw bytes, and
torchao's MXTensor itself as a parameter, which it pickles (recorded below,
with what that needs). docs/api-notes.md "torch.export" sums it up.

The server tests start build/tensord (TENSORD_BIN) and skip, saying why,
where it is not built: the rest of this directory needs no server.
"""

import json
import os
import re
import subprocess
import time
import zipfile

import numpy as np
import pytest

import tensord
from tensord import mx
from test_mx_torchao import assert_same_values, need

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
OUT, IN, BLOCK = 48, 64, 32
# OCP E2M1 values of the 16 FP4 codes (bit 3 the sign), written from the spec
E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]
FMTS = ["mxfp8_e4m3", "mxfp4_e2m1"]  # the two whose torchao qdata bytes are tensord's element bytes


@pytest.fixture
def torch():
    return need("torch", "torch")


@pytest.fixture
def ao(torch):
    need("ml_dtypes", "ml-dtypes")
    return need("torchao.prototype.mx_formats.mx_tensor", "torchao")


def elem_dtype(torch, fmt):
    return {"mxfp8_e4m3": torch.float8_e4m3fn, "mxfp4_e2m1": torch.float4_e2m1fn_x2}[fmt]


def torchao_weight(ao, torch, fmt, seed=0):
    w = torch.randn(OUT, IN, generator=torch.Generator().manual_seed(seed))
    return ao.MXTensor.to_mx(w, elem_dtype(torch, fmt), BLOCK)


def make_module(torch, fmt, codes, scale, persistent):
    """MX weight as plain tensors: `codes` uint8 (FP8 one per byte, FP4 two),
    `scale` float8_e8m0fnu; persistent=False puts the scale among the
    program's constants instead of its state_dict."""

    class MxLinear(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("codes", codes.clone())
            self.register_buffer("scale", scale.clone(), persistent=persistent)

        def weight(self):
            if fmt == "mxfp8_e4m3":
                vals = self.codes.view(torch.float8_e4m3fn).to(torch.float32)
            else:  # element 2j in the low nibble; the table becomes a lifted constant of the program
                idx = torch.stack([self.codes & 15, self.codes >> 4], dim=-1).reshape(OUT, IN)
                vals = torch.tensor(E2M1)[idx.long()]
            # e8m0 -> float32 is 2^(code-127), NaN for 255: the spec's scale, exactly
            s = self.scale.to(torch.float32).unsqueeze(-1)
            return (vals.reshape(OUT, IN // BLOCK, BLOCK) * s).reshape(OUT, IN)

        def forward(self, x):
            return x @ self.weight().T

    return MxLinear()


def export_round_trip(torch, module, x, path):
    ep = torch.export.export(module, (x,))
    torch.export.save(ep, path)
    return torch.export.load(path)


def archive_config(path, kind):
    """The .pt2 archive's payload config for `kind` ("weights" or
    "constants"), and a reader of its records."""
    z = zipfile.ZipFile(path)
    name = next(n for n in z.namelist() if n.endswith("data/%s/model_%s_config.json" % (kind, kind)))
    base = name.rsplit("/", 1)[0] + "/"
    return json.loads(z.read(name))["config"], lambda rec: z.read(base + rec)


def loaded_parts(ep, persistent):
    where = ep.state_dict if persistent else ep.constants
    return ep.state_dict["codes"], where["scale"]


def rebuild(ao, torch, fmt, codes, scale):
    """torchao's MXTensor from the loaded tensors, as to_mx made it."""
    qdata = codes.view(torch.float8_e4m3fn) if fmt == "mxfp8_e4m3" else codes
    return ao.MXTensor(qdata, scale, elem_dtype(torch, fmt), BLOCK, torch.float32, None, None, False)


@pytest.mark.parametrize("persistent", [True, False], ids=["state_dict", "constants"])
@pytest.mark.parametrize("fmt", FMTS)
def test_buffers_survive_save_and_load(ao, torch, tmp_path, fmt, persistent):
    m = torchao_weight(ao, torch, fmt)
    codes, scale = m.qdata.view(torch.uint8), m.scale
    assert scale.dtype == torch.float8_e8m0fnu
    module = make_module(torch, fmt, codes, scale, persistent)
    x = torch.randn(5, IN, generator=torch.Generator().manual_seed(1))
    path = str(tmp_path / "mx.pt2")
    ep = export_round_trip(torch, module, x, path)

    got_codes, got_scale = loaded_parts(ep, persistent)
    assert got_codes.dtype == torch.uint8 and got_scale.dtype == torch.float8_e8m0fnu, \
        "torch.export.load changed the dtypes: %s, %s" % (got_codes.dtype, got_scale.dtype)
    assert torch.equal(got_codes, codes)
    assert torch.equal(got_scale.view(torch.uint8), scale.view(torch.uint8))
    # the archive holds plain tensors as raw bytes (no pickle), the dtype by its schema code:
    # what a reader outside Python would need
    schema = need("torch._export.serde.schema", "torch")
    cfg, read = archive_config(path, "weights" if persistent else "constants")
    meta = cfg["scale"]
    assert meta["use_pickle"] is False and meta["tensor_meta"]["dtype"] == schema.ScalarType.FLOAT8E8M0FNU.value
    assert read(meta["path_name"]) == scale.view(torch.uint8).numpy().tobytes()

    # the loaded program computes what the module does, and its weight is torchao's dequantize()
    assert torch.equal(ep.module()(x), module(x))
    want_w = m.dequantize(torch.float32)
    assert_same_values(module.weight().numpy(), want_w.numpy())

    # tensord's MxTensor from the loaded tensors: torchao's path and the bytes as they are agree
    q = mx.from_torchao(rebuild(ao, torch, fmt, got_codes, got_scale))
    assert q == mx.MxTensor(fmt, got_codes.numpy(), got_scale.view(torch.uint8).numpy(), (OUT, IN), BLOCK, -1)
    assert_same_values(q.dequantize(), want_w.numpy())


def test_mxtensor_as_a_parameter(ao, torch, tmp_path):
    """torchao's MXTensor held directly. Its own linear refuses a weight
    with no activation quantization (so a module must call dequantize());
    with that, export, save and load work and keep the subclass, but the
    archive pickles it: loading needs torchao importable, and nothing but
    Python can read that record."""
    m = torchao_weight(ao, torch, "mxfp8_e4m3", seed=2)
    x = torch.randn(5, IN, generator=torch.Generator().manual_seed(3))
    with pytest.raises(AssertionError, match="weight-only quant not yet supported"):
        torch.nn.functional.linear(x, m)  # torchao 0.18: F.linear needs act_quant_kwargs

    class Holder(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(m, requires_grad=False)

        def forward(self, x):
            return x @ self.w.dequantize(torch.float32).T

    path = str(tmp_path / "subclass.pt2")
    ep = export_round_trip(torch, Holder(), x, path)
    w = ep.state_dict["w"]
    assert isinstance(w, ao.MXTensor), "torch.export.load gave %s, not torchao's MXTensor" % type(w)
    assert w.scale.dtype == torch.float8_e8m0fnu
    assert mx.from_torchao(w) == mx.from_torchao(m)
    assert torch.equal(ep.module()(x), Holder()(x))
    cfg, read = archive_config(path, "weights")
    assert cfg["w"]["use_pickle"] is True, "the MXTensor record is no longer pickled: %s" % cfg["w"]
    assert b"torchao.prototype.mx_formats.mx_tensor" in read(cfg["w"]["path_name"])


# ---------------------------------------------------------------- a real server

@pytest.fixture
def server_url(tmp_path):
    binary = os.environ.get("TENSORD_BIN", os.path.join(REPO, "build", "tensord"))
    if not os.access(binary, os.X_OK):
        why = "no tensord binary at %s (build it, or set TENSORD_BIN)" % binary
        print("skipping: " + why)
        pytest.skip(why)
    log = open(tmp_path / "tensord.log", "w+")
    proc = subprocess.Popen([binary, "--listen", "127.0.0.1:0", "--backend", "cpu", "--threads", "2",
                             "--state-dir", str(tmp_path / "state")], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=log)
    try:
        deadline, url = time.time() + 30, None
        while url is None and time.time() < deadline and proc.poll() is None:
            time.sleep(0.05)
            log.seek(0)
            found = re.search(r'listening on (http://[^\s"]+)', log.read())
            url = found and found.group(1).rstrip("/")
        log.seek(0)
        assert url, "tensord did not start (exit %s):\n%s" % (proc.poll(), log.read()[-3000:])
        yield url
    finally:
        proc.terminate()
        proc.wait(30)
        log.close()


@pytest.mark.parametrize("fmt", FMTS)
def test_loaded_weights_run_on_tensord(ao, torch, tmp_path, server_url, fmt):
    """The exported program's MX weight uploaded as tensord MX tensors: the
    server's mx.dequantize is torch's dequantization bit for bit, and its
    matmul with x is the loaded program's output up to float32 summation."""
    m = torchao_weight(ao, torch, fmt, seed=4)
    module = make_module(torch, fmt, m.qdata.view(torch.uint8), m.scale, True)
    x = torch.randn(7, IN, generator=torch.Generator().manual_seed(5))
    ep = export_round_trip(torch, module, x, str(tmp_path / "mx.pt2"))
    t = rebuild(ao, torch, fmt, *loaded_parts(ep, True))
    w = mx.from_torchao(t)        # (OUT, IN), blocks along IN
    wt = mx.from_torchao(t.t())   # torchao's transposed layout: (IN, OUT), axis 0, the same bytes
    assert (wt.axis, wt.shape) == (0, (IN, OUT))

    with tensord.Client(server_url, timeout=60) as c:
        c.upload({"export/w": w, "export/wt": wt})
        r = c.run({"nodes": [{"id": "d", "op": "mx.dequantize", "args": ["$stored/export/w"], "outputs": ["d"]},
                             {"id": "y", "op": "matmul", "args": ["x", "$stored/export/wt"], "outputs": ["y"]}],
                   "outputs": ["d", "y"]}, inputs={"x": x.numpy()})
    assert_same_values(r["d"], module.weight().numpy())
    want = ep.module()(x).numpy()
    mag = np.abs(x.numpy()) @ np.abs(r["d"]).T  # the summation error's scale
    assert r["y"].dtype == np.float32 and r["y"].shape == want.shape == (7, OUT)
    assert (np.abs(r["y"] - want) <= 1e-5 * mag + 1e-30).all(), np.abs(r["y"] - want).max()
