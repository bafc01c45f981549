"""tensord's MX tensors (API.md 7) read and written by PyTorch's own tools,
the real packages from PyPI: torchao's MX tensor
(torchao.prototype.mx_formats), ml_dtypes' numpy float8/6/4 and e8m0 types,
Hugging Face's safetensors reader. build/torch-venv has them all
(scripts/install-torch.sh, scripts/torch-constraints.txt); an interpreter
that lacks one skips the tests that need it, printing which.

Every comparison of values is of float32 bits: equal bit patterns, and NaN
exactly where the other side has NaN.
"""

import importlib
import json
import os

import numpy as np
import pytest

from tensord import mx
from tensord import safetensors as st
from tensord.mx import FORMATS, MxTensor

# (shape, axis): blocks along the last axis (1-D, 2-D, 3-D), and along the
# first of a 2-D tensor (torchao's transposed layout), given either way
CASES = [((64,), -1), ((4, 64), -1), ((2, 3, 96), 2), ((96, 8), 0), ((64, 4), -2)]


def need(module, package):
    try:
        return importlib.import_module(module)
    except ImportError as e:
        why = "%s is not importable by this interpreter (pip install %s; build/torch-venv has it): %s" % (
            module, package, e)
        print("skipping: " + why)
        pytest.skip(why)


@pytest.fixture
def ml_dtypes():
    return need("ml_dtypes", "ml-dtypes")


@pytest.fixture
def torch():
    return need("torch", "torch")


@pytest.fixture
def ao(torch, ml_dtypes):
    """torchao's mx_tensor module (MXTensor, to_mx); ml_dtypes too, which
    random_mx uses."""
    return need("torchao.prototype.mx_formats.mx_tensor", "torchao")


@pytest.fixture
def hf_safetensors(torch):
    need("safetensors.torch", "safetensors")
    return need("safetensors", "safetensors")


def random_mx(fmt, shape, axis, block_size=32, seed=0):
    """Random element codes (every code, NaN and inf ones included) and
    random scales over all 256 e8m0 codes: (MxTensor, its codes)."""
    rng = np.random.default_rng(seed)
    ax = axis % len(shape)
    codes = rng.integers(0, 1 << FORMATS[fmt][0], shape, dtype=np.uint8)
    scale_shape = list(shape)
    scale_shape[ax] //= block_size
    scale = rng.integers(0, 256, scale_shape, dtype=np.uint8)
    ml = importlib.import_module("ml_dtypes")
    q = MxTensor.from_ml_dtypes(codes.view(getattr(ml, mx.ML_DTYPES[fmt])), scale.view(ml.float8_e8m0fnu),
                                block_size, axis)
    return q, codes


def assert_same_values(got, want):
    got = np.asarray(got, dtype=np.float32)
    want = np.asarray(want, dtype=np.float32)
    assert got.shape == want.shape
    nan_got, nan_want = np.isnan(got), np.isnan(want)
    np.testing.assert_array_equal(nan_got, nan_want)
    np.testing.assert_array_equal(np.where(nan_got, 0, got).view(np.uint32),
                                  np.where(nan_want, 0, want).view(np.uint32))


def assert_same_mx(got, want):
    """The same MX tensor, the axis compared as an index (torchao's side
    has no negative axes: from_torchao gives -1 or 0)."""
    assert (got.format, got.block_size, got.shape) == (want.format, want.block_size, want.shape)
    assert got.axis % len(got.shape) == want.axis % len(want.shape)
    np.testing.assert_array_equal(got.elements, want.elements)
    np.testing.assert_array_equal(got.scale, want.scale)


def torch_to_numpy_f32(t):
    return t.detach().cpu().float().numpy()


# ---------------------------------------------------------------- ml_dtypes

@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_every_code_has_ml_dtypes_value(ml_dtypes, fmt):
    """Each code of the format, scale 2^0: ml_dtypes' value of the code is
    the client's MxTensor.dequantize() (NaN and inf codes included)."""
    bits = FORMATS[fmt][0]
    n = 1 << bits
    codes = np.tile(np.arange(n, dtype=np.uint8), 2)  # 2*n elements: a whole number of 32-blocks
    q = MxTensor.from_ml_dtypes(codes.view(getattr(ml_dtypes, mx.ML_DTYPES[fmt])),
                                np.full(2 * n // 32, 127, np.uint8).view(ml_dtypes.float8_e8m0fnu))
    assert q.format == fmt and np.array_equal(q.codes(), codes)
    assert_same_values(q.dequantize(), q.elements_as_ml_dtypes().astype(np.float32))


@pytest.mark.parametrize("shape,axis", CASES + [((3, 64, 2), 1)])
@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_ml_dtypes_round_trip(ml_dtypes, fmt, shape, axis):
    q, codes = random_mx(fmt, shape, axis)
    el, sc = q.elements_as_ml_dtypes(), q.scale_as_ml_dtypes()
    assert el.dtype == np.dtype(getattr(ml_dtypes, mx.ML_DTYPES[fmt])) and el.shape == shape
    assert sc.dtype == np.dtype(ml_dtypes.float8_e8m0fnu) and sc.shape == q.scale.shape
    np.testing.assert_array_equal(el.view(np.uint8), codes)
    np.testing.assert_array_equal(sc.view(np.uint8), q.scale)
    assert MxTensor.from_ml_dtypes(el, sc, q.block_size, q.axis) == q
    # the values ml_dtypes gives, scaled block by block, are the client's
    with np.errstate(over="ignore", invalid="ignore"):
        scaled = el.astype(np.float32) * np.repeat(sc.astype(np.float32), q.block_size, axis=axis % len(shape))
    assert_same_values(q.dequantize(), scaled)


def test_ml_dtypes_refuses_malformed_input(ml_dtypes):
    e8m0 = ml_dtypes.float8_e8m0fnu
    good_el = np.zeros(64, ml_dtypes.float4_e2m1fn)
    good_sc = np.full(2, 127, np.uint8).view(e8m0)
    assert MxTensor.from_ml_dtypes(good_el, good_sc).format == "mxfp4_e2m1"
    with pytest.raises(ValueError, match="must be one of ml_dtypes"):
        MxTensor.from_ml_dtypes(np.zeros(64, np.float32), good_sc)  # not an MX element type
    with pytest.raises(ValueError, match="must be one of ml_dtypes"):
        MxTensor.from_ml_dtypes(np.zeros(64, ml_dtypes.bfloat16), good_sc)
    with pytest.raises(ValueError, match="float8_e8m0fnu"):
        MxTensor.from_ml_dtypes(good_el, np.full(2, 127, np.uint8))  # scale codes, not e8m0
    with pytest.raises(ValueError, match="scale must be"):
        MxTensor.from_ml_dtypes(good_el, np.full(3, 127, np.uint8).view(e8m0))  # 3 scales for 2 blocks
    with pytest.raises(ValueError, match="multiple of block_size"):
        MxTensor.from_ml_dtypes(np.zeros(48, ml_dtypes.float8_e4m3fn), np.ones(1, e8m0))
    with pytest.raises(ValueError, match="wider than 6 bits"):
        MxTensor.from_ml_dtypes(np.full(32, 0xFF, np.uint8).view(ml_dtypes.float6_e2m3fn), np.ones(1, e8m0))
    with pytest.raises(ValueError, match="out of range"):
        MxTensor.from_ml_dtypes(good_el, good_sc, axis=1)


# ---------------------------------------------------------------- torchao

@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_to_torchao_lays_out_as_torchao_does(ao, torch, fmt):
    """torchao's own layout: qdata in the logical shape (FP8 as torch's
    float8 dtypes, FP6 one code per uint8, FP4 two per uint8 with the last
    dimension halved, element 2j in the low nibble), e8m0 scales with the
    last dimension divided by the block size, not swizzled."""
    q, codes = random_mx(fmt, (4, 64), -1)
    t = mx.to_torchao(q)
    assert isinstance(t, ao.MXTensor)
    assert tuple(t.shape) == (4, 64) and t.dtype == torch.float32 and t.block_size == 32
    assert not t.is_swizzled_scales
    assert t.scale.dtype == torch.float8_e8m0fnu and tuple(t.scale.shape) == (4, 2)
    np.testing.assert_array_equal(t.scale.view(torch.uint8).numpy(), q.scale)
    qd = t.qdata.view(torch.uint8).numpy()
    if fmt.startswith("mxfp8"):
        assert t.elem_dtype == {"mxfp8_e4m3": torch.float8_e4m3fn, "mxfp8_e5m2": torch.float8_e5m2}[fmt]
        assert t.qdata.dtype == t.elem_dtype
        np.testing.assert_array_equal(qd, codes)
    elif fmt.startswith("mxfp6"):
        assert t.elem_dtype == {"mxfp6_e2m3": "fp6_e2m3", "mxfp6_e3m2": "fp6_e3m2"}[fmt]
        assert t.qdata.dtype == torch.uint8 and tuple(t.qdata.shape) == (4, 64)
        np.testing.assert_array_equal(qd, codes)  # unpacked: one code per byte, bits 0-5
    else:
        assert t.elem_dtype == torch.float4_e2m1fn_x2
        assert t.qdata.dtype == torch.uint8 and tuple(t.qdata.shape) == (4, 32)
        np.testing.assert_array_equal(qd & 0xF, codes[:, 0::2])
        np.testing.assert_array_equal(qd >> 4, codes[:, 1::2])
        np.testing.assert_array_equal(qd, q.elements)  # tensord's FP4 bytes as they are


@pytest.mark.parametrize("shape,axis", CASES)
@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_torchao_round_trip_and_dequantized_values(ao, torch, fmt, shape, axis):
    q, _ = random_mx(fmt, shape, axis, seed=len(shape) + axis)
    t = mx.to_torchao(q)
    assert isinstance(t, ao.MXTensor) and tuple(t.shape) == shape
    if axis % len(shape) != len(shape) - 1:
        assert not t.qdata.is_contiguous() and t.qdata.t().is_contiguous()  # torchao's transposed layout
    d = t.dequantize()
    assert d.dtype == torch.float32 and tuple(d.shape) == shape
    assert_same_values(torch_to_numpy_f32(d), q.dequantize())
    back = mx.from_torchao(t)
    assert back.axis == (-1 if axis % len(shape) == len(shape) - 1 else 0)
    assert_same_mx(back, q)
    # bfloat16: torchao's values are the float32 ones rounded to bfloat16
    t16 = mx.to_torchao(q, torch.bfloat16)
    assert t16.dtype == torch.bfloat16
    assert_same_mx(mx.from_torchao(t16), q)
    d16 = t16.dequantize()
    assert d16.dtype == torch.bfloat16
    assert_same_values(torch_to_numpy_f32(d16), torch_to_numpy_f32(torch.from_numpy(q.dequantize()).bfloat16()))


@pytest.mark.parametrize("swizzled", [False, True], ids=["rows", "swizzled"])
@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_from_torchao_of_what_torchao_quantized(ao, torch, fmt, swizzled):
    """torchao's own quantizer (to_mx, its OCP floor scales), zeros, inf
    and NaN blocks included; its transpose too; swizzled scales are read
    back in row order. The MxTensor dequantizes to torchao's values and
    goes back to the same qdata and scales."""
    elem = {"mxfp8_e4m3": torch.float8_e4m3fn, "mxfp8_e5m2": torch.float8_e5m2, "mxfp6_e2m3": "fp6_e2m3",
            "mxfp6_e3m2": "fp6_e3m2", "mxfp4_e2m1": torch.float4_e2m1fn_x2}[fmt]
    g = torch.Generator().manual_seed(1)
    x = torch.randn(128, 64, generator=g) * torch.logspace(-30, 30, 128).reshape(128, 1)
    x[0, :32] = 0.0
    x[1, 3] = float("inf")
    x[2, 40] = float("nan")
    m = ao.MXTensor.to_mx(x, elem, 32, is_swizzled_scales=swizzled)
    for t, axis in ((m, -1), (m.t(), 0)):
        q = mx.from_torchao(t)
        assert q.format == fmt and q.axis == axis and q.shape == tuple(t.shape) and q.block_size == 32
        assert_same_values(q.dequantize(), torch_to_numpy_f32(t.dequantize(torch.float32)))
        if not swizzled:
            again = mx.to_torchao(q)
            assert torch.equal(again.qdata.view(torch.uint8), t.qdata.view(torch.uint8))
            assert torch.equal(again.scale.view(torch.uint8), t.scale.view(torch.uint8))
    assert np.isnan(mx.from_torchao(m).dequantize()[2, 32:]).all()  # torchao's NaN block: scale 0xFF


def test_to_torchao_refuses_what_torchao_cannot_represent(ao, torch):
    q3, _ = random_mx("mxfp8_e4m3", (2, 64, 3), 1)
    with pytest.raises(ValueError, match="blocks the last dimension"):
        mx.to_torchao(q3)  # a middle axis: torchao blocks the last one
    q30, _ = random_mx("mxfp4_e2m1", (64, 2, 3), 0)
    with pytest.raises(ValueError, match="blocks the last dimension"):
        mx.to_torchao(q30)  # the first axis of a 3-D tensor: no transposed layout there
    q1, _ = random_mx("mxfp4_e2m1", (64, 1), 0)
    with pytest.raises(ValueError, match="dimension"):
        mx.to_torchao(q1)  # transposed with a dimension of 1 reads as contiguous to torchao
    q, _ = random_mx("mxfp6_e3m2", (4, 64), -1)
    with pytest.raises(ValueError, match="orig_dtype"):
        mx.to_torchao(q, torch.float16)
    with pytest.raises(ValueError, match="MxTensor"):
        mx.to_torchao(np.zeros((4, 64), np.float32))
    with pytest.raises(ValueError, match="MxTensor"):
        mx.to_torchao(torch.zeros(4, 64))


def test_from_torchao_refuses_malformed_input(ao, torch):
    e8m0 = torch.float8_e8m0fnu
    ones = torch.full((4, 2), 127, dtype=torch.uint8).view(e8m0)

    def make(qdata, scale, elem):
        return ao.MXTensor(qdata, scale, elem, 32, torch.float32, None, None, False)

    ok = make(torch.zeros(4, 32, dtype=torch.uint8), ones, torch.float4_e2m1fn_x2)
    assert mx.from_torchao(ok).shape == (4, 64)
    with pytest.raises(ValueError, match="MXTensor"):
        mx.from_torchao(torch.zeros(4, 64))  # a plain tensor
    with pytest.raises(ValueError, match="MXTensor"):
        mx.from_torchao(mx.to_torchao(random_mx("mxfp8_e4m3", (4, 64), -1)[0]).dequantize())
    with pytest.raises(ValueError, match="no such MX format"):
        mx.from_torchao(make(torch.zeros(4, 64, dtype=torch.uint8), ones, torch.int8))
    with pytest.raises(ValueError, match="qdata must be torch.uint8"):
        mx.from_torchao(make(torch.zeros(4, 32).to(torch.float8_e4m3fn), ones, torch.float4_e2m1fn_x2))
    with pytest.raises(ValueError, match="wider than 6 bits"):
        mx.from_torchao(make(torch.full((4, 64), 0x40, dtype=torch.uint8), ones, "fp6_e2m3"))
    with pytest.raises(ValueError, match="scale must be"):
        mx.from_torchao(make(torch.zeros(4, 64).to(torch.float8_e5m2),
                             torch.full((4, 3), 127, dtype=torch.uint8).view(e8m0), torch.float8_e5m2))
    with pytest.raises(ValueError, match="does not divide"):
        mx.from_torchao(make(torch.zeros(4, 48).to(torch.float8_e5m2), ones, torch.float8_e5m2))
    bad_scale = make(torch.zeros(4, 64).to(torch.float8_e4m3fn), ones, torch.float8_e4m3fn)
    bad_scale.scale = torch.full((4, 2), 127, dtype=torch.uint8)  # the codes, not float8_e8m0fnu
    with pytest.raises(ValueError, match="float8_e8m0fnu"):
        mx.from_torchao(bad_scale)
    strided = torch.zeros(4, 128).to(torch.float8_e4m3fn)[:, ::2]  # neither contiguous nor transposed
    with pytest.raises(ValueError, match="neither contiguous nor transposed"):
        mx.from_torchao(make(strided, ones, torch.float8_e4m3fn))


# ---------------------------------------------------------------- safetensors

@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_safetensors_file_read_by_the_safetensors_package(hf_safetensors, ao, torch, tmp_path, fmt):
    """A file the client writes (tensord.safetensors.save_file) for an MX
    tensor, read by Hugging Face's safetensors: `<name>` U8 (the packed
    elements), `<name>.scale` F8_E8M0 (torch.float8_e8m0fnu), the
    description in the metadata; from those, torchao's tensor has the
    client's values. And the way back: the parts saved by
    safetensors.torch.save_file load in the client as the same MxTensor."""
    q, _ = random_mx(fmt, (8, 64), -1, seed=3)
    qa, _ = random_mx(fmt, (96, 4), 0, seed=4)
    bias = np.arange(3, dtype=np.float32)
    path = str(tmp_path / "mx.safetensors")
    st.save_file({"w": q, "wt": qa, "bias": bias}, path, metadata={"note": "hello"})

    loaded = hf_safetensors.torch.load_file(path)
    assert set(loaded) == {"w", "w.scale", "wt", "wt.scale", "bias"}
    with hf_safetensors.safe_open(path, framework="pt") as f:
        meta = f.metadata()
        np.testing.assert_array_equal(f.get_tensor("w").numpy(), q.elements)
    assert meta["note"] == "hello"
    for name, want in (("w", q), ("wt", qa)):
        assert json.loads(meta[name]) == want.metadata()
        el, sc = loaded[name], loaded[name + ".scale"]
        assert el.dtype == torch.uint8 and tuple(el.shape) == want.elements.shape
        assert sc.dtype == torch.float8_e8m0fnu and tuple(sc.shape) == want.scale.shape
        np.testing.assert_array_equal(el.numpy(), want.elements)
        np.testing.assert_array_equal(sc.view(torch.uint8).numpy(), want.scale)
        got = MxTensor.from_parts(meta[name], el.numpy(), sc.view(torch.uint8).numpy())
        assert got == want
        assert_same_values(torch_to_numpy_f32(mx.to_torchao(got).dequantize()), want.dequantize())
    np.testing.assert_array_equal(loaded["bias"].numpy(), bias)

    # the way back: a file the safetensors package writes, read by the client
    path2 = str(tmp_path / "from_torch.safetensors")
    hf_safetensors.torch.save_file({"w": loaded["w"], "w.scale": loaded["w.scale"]}, path2,
                                   metadata={"w": meta["w"]})
    tensors, meta2 = st.load_file(path2)
    assert tensors["w"] == q and meta2 == {}


def test_mx_module_imports_without_torch():
    """The package keeps torch, torchao and ml_dtypes out of `import tensord`."""
    import subprocess
    import sys
    code = ("import sys; import tensord, tensord.mx; "
            "bad = [m for m in ('torch', 'torchao', 'ml_dtypes', 'safetensors') if m in sys.modules]; "
            "assert not bad, bad")
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(mx.__file__))))
    subprocess.run([sys.executable, "-c", code], check=True, env=env, timeout=120)
