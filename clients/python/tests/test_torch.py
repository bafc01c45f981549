"""torch tensors in and out (API.md 12): sent as their bits (any dtype, not
contiguous, requires_grad, conjugate views), results sharing the received
memory. Skipped, saying so, where torch is not installed."""

import warnings

import numpy as np
import pytest

from tensord import TensorData
from tensord import safetensors as st

# ---------------------------------------------------------------- torch

def test_torch_values_are_sent_as_their_bits(torch):
    x = torch.arange(6, dtype=torch.float32).reshape(2, 3).requires_grad_()
    name, shape, raw = st.convert(x.t())  # requires_grad and not contiguous
    assert (name, shape) == ("float32", [3, 2])
    assert np.frombuffer(raw, "<f4").tolist() == x.detach().t().contiguous().reshape(-1).tolist()
    b = torch.tensor([1.0, -2.5, 3.140625], dtype=torch.bfloat16)
    name, shape, raw = st.convert(b)
    assert name == "bfloat16" and np.frombuffer(raw, "<u2").tolist() == b.view(torch.int16).numpy().view(np.uint16).tolist()
    c = torch.tensor([1 + 2j], dtype=torch.complex64).conj()  # a conjugate view
    assert np.frombuffer(st.convert(c)[2], "<c8").tolist() == [1 - 2j]
    with pytest.raises(ValueError), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch calls complex32 experimental
        st.convert(torch.zeros(2, dtype=torch.complex32))


def test_torch_results_share_the_received_memory(torch):
    from tensord import _torch
    arr = np.arange(4, dtype=np.float32)
    t = _torch.from_host(arr)
    assert t.dtype == torch.float32 and t.data_ptr() == arr.ctypes.data
    bf = _torch.from_host(TensorData(np.array([0x3F80, 0xC000], np.uint16), "bfloat16"))
    assert bf.dtype == torch.bfloat16 and bf.float().tolist() == [1.0, -2.0]
    f8 = TensorData(np.array([0x38], np.uint8), "float8_e4m3fn")
    got = _torch.from_host(f8)
    if getattr(torch, "float8_e4m3fn", None) is None:
        assert got is f8  # this torch has no float8: the value stays TensorData
    else:
        assert got.dtype == torch.float8_e4m3fn and got.float().tolist() == [1.0]
