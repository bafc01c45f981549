"""linalg.eigh through the server: eigenvalues against numpy in float64 (and
residual / orthogonality) for the shapes and kinds the CPU suites cover,
both UPLO, all four dtypes; numerical_error and shape_mismatch replies."""

import numpy as np
import pytest

import tensord

DTYPES = [np.float32, np.float64, np.complex64, np.complex128]


def hermitian(shape, dtype, kind, seed=0):
    rng = np.random.default_rng(seed)
    n = shape[-1]
    a = rng.standard_normal(shape)
    if np.issubdtype(dtype, np.complexfloating):
        a = a + 1j * rng.standard_normal(shape)
    a = (a + np.conj(np.swapaxes(a, -1, -2))) / 2
    if kind == "diagonal":
        a = a * np.eye(n)
    elif kind == "zero":
        a = np.zeros(shape)
    elif kind == "repeated":
        q, _ = np.linalg.qr(rng.standard_normal((n, n)))
        d = np.array([(-1.0, 0.5, 2.0)[i % 3] for i in range(n)])
        a = np.broadcast_to(q @ np.diag(d) @ q.T, shape).copy()
    return a.astype(dtype)


def garbage_other_triangle(a, uplo):
    n = a.shape[-1]
    mask = np.tril(np.ones((n, n), bool)) if uplo == "L" else np.triu(np.ones((n, n), bool))
    return np.where(mask, a, np.array(1e3, dtype=a.dtype))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("uplo", ["L", "U"])
@pytest.mark.parametrize("shape,kind", [
    ((2, 3, 6, 6), "random"),
    ((40, 16, 16), "random"),
    ((5, 9, 9), "repeated"),
    ((3, 7, 7), "diagonal"),
    ((4, 5, 5), "zero"),
    ((3, 1, 1), "random"),
    ((2, 300, 300), "random"),
])
def test_eigh_matches_numpy(client, dtype, uplo, shape, kind):
    # Complex n = 300 goes through LAPACK zheevd: it pins the workaround for
    # OpenBLAS 0.3.21 reading past the end of A (see ops/cpu/eigh_lapack.cpp).
    a = hermitian(shape, dtype, kind)
    w, v = client.eigh(garbage_other_triangle(a, uplo), UPLO=uplo)
    assert w.shape == shape[:-1] and v.shape == shape
    single = dtype in (np.float32, np.complex64)
    n = shape[-1]
    tol = (2e-6 if single else 1e-13) * np.sqrt(n)
    a64 = a.astype(np.complex128 if np.iscomplexobj(a) else np.float64)
    w_ref = np.linalg.eigvalsh(a64)
    scale = max(1.0, float(np.abs(w_ref).max()))
    np.testing.assert_allclose(w, w_ref, atol=tol * scale * n, rtol=0)
    assert np.all(np.diff(w, axis=-1) >= 0)
    v64 = v.astype(np.complex128)
    resid = np.linalg.norm(a64 @ v64 - v64 * w[..., None, :], axis=(-2, -1))
    assert np.all(resid <= tol * np.maximum(np.linalg.norm(a64, axis=(-2, -1)), 1e-300) + 1e-30)
    orth = np.linalg.norm(np.conj(np.swapaxes(v64, -1, -2)) @ v64 - np.eye(n), axis=(-2, -1))
    assert np.all(orth <= (1e-5 * n if single else tol))
    assert np.allclose(client.eigvalsh(garbage_other_triangle(a, uplo), UPLO=uplo), w, atol=tol * scale * n)


def test_eigh_nan_is_numerical_error_naming_the_node(client):
    a = hermitian((3, 4, 4), np.float32, "random")
    a[1, 2, 1] = np.nan
    with pytest.raises(tensord.TensordError) as e:
        client.eigh(a)
    assert e.value.status == 422
    assert e.value.code == "numerical_error"
    assert e.value.node == "n"  # the program node Client.eigh builds


def test_eigh_non_square_is_shape_mismatch(client):
    with pytest.raises(tensord.TensordError) as e:
        client.eigh(np.zeros((2, 3, 4), np.float32))
    assert e.value.status == 422
    assert e.value.code == "shape_mismatch"
