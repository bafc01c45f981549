"""Fused optimizers on the real server (API.md section 6) against torch.optim.

torch is Debian's python3-torch (1.13: Adam, AdamW, SGD, Adagrad with every
option; no Muon, which is checked against a float64 numpy reference of
torch.optim.Muon's algorithm). Error metric: per tensor, max |got - want| /
max |want| (relative to the tensor's scale), <= 2e-6 for float32.
"""

import numpy as np
import pytest

from tensord import TensorData, TensordError

torch = pytest.importorskip("torch")

TOL = 2e-6
SHAPES = [(64, 33), (1000,), (7,)]
STEPS = 4


def rel_err(got, want):
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    scale = np.abs(want).max()
    return np.abs(got - want).max() / (scale if scale > 0 else 1.0)


def as_f32(x):
    return x.to_float32() if isinstance(x, TensorData) else np.asarray(x, dtype=np.float32)


def torch_run(kind, params0, grads, hyper):
    cls = {"sgd": torch.optim.SGD, "adam": torch.optim.Adam, "adamw": torch.optim.AdamW,
           "adagrad": torch.optim.Adagrad}[kind]
    hyper = dict(hyper)
    if kind == "sgd":
        hyper.setdefault("lr", 1e-3)  # torch 1.13's SGD has no default lr; tensord's is torch 2's 1e-3
    ps = [torch.nn.Parameter(torch.tensor(p)) for p in params0]
    opt = cls(ps, **hyper)
    for gs in grads:
        for p, g in zip(ps, gs):
            p.grad = torch.tensor(g)
        opt.step()
    state = [{k: (v.numpy() if torch.is_tensor(v) else v) for k, v in opt.state[p].items() if v is not None}
             for p in ps]
    return [p.detach().numpy() for p in ps], state


def setup_params(client, uniq, shapes=SHAPES, seed=0, dtype=np.float32):
    rng = np.random.default_rng(seed)
    names, values = [], []
    for i, s in enumerate(shapes):
        v = rng.standard_normal(s).astype(dtype)
        name = "%s/w%d" % (uniq, i)
        client.put(name, v)
        names.append(name)
        values.append(v)
    return names, values


def grad_seq(shapes, steps=STEPS, seed=1):
    rng = np.random.default_rng(seed)
    return [[(0.5 * rng.standard_normal(s)).astype(np.float32) for s in shapes] for _ in range(steps)]


CASES = [
    ("adam", {}),
    ("adam", {"amsgrad": True, "lr": 1e-2}),
    ("adam", {"maximize": True}),
    ("adam", {"weight_decay": 0.1}),
    ("adam", {"betas": (0.8, 0.99), "eps": 1e-6, "lr": 3e-2}),
    ("adamw", {}),
    ("adamw", {"amsgrad": True, "weight_decay": 0.3, "lr": 1e-2}),
    ("adamw", {"maximize": True, "weight_decay": 0.0}),
    ("sgd", {"lr": 0.1}),
    ("sgd", {"lr": 0.1, "momentum": 0.9}),
    ("sgd", {"lr": 0.05, "momentum": 0.9, "dampening": 0.5}),
    ("sgd", {"lr": 0.05, "momentum": 0.9, "nesterov": True}),
    ("sgd", {"lr": 0.05, "momentum": 0.5, "weight_decay": 0.01, "maximize": True}),
    ("adagrad", {}),
    ("adagrad", {"lr_decay": 0.05}),
    ("adagrad", {"initial_accumulator_value": 0.3, "lr": 0.1}),
    ("adagrad", {"weight_decay": 0.1, "maximize": True}),
    ("adagrad", {"eps": 1e-4, "lr": 0.05}),
]


@pytest.mark.parametrize("kind,hyper", CASES, ids=["%s-%s" % (k, "-".join(sorted(h)) or "defaults") for k, h in CASES])
def test_matches_torch(client, uniq, kind, hyper):
    names, p0 = setup_params(client, uniq)
    grads = grad_seq(SHAPES)
    opt = client.optimizer(kind, params=names, state=uniq + "/opt", **hyper)
    for gs in grads:
        opt.step(gs)
    want_p, want_state = torch_run(kind, p0, grads, hyper)
    state = opt.state()
    worst = 0.0
    for name, wp, ws in zip(names, want_p, want_state):
        worst = max(worst, rel_err(client.get(name), wp))
        assert rel_err(client.get(name), wp) <= TOL, name
        got = state.get(name, {})
        assert sorted(got) == sorted(ws), (name, sorted(got), sorted(ws))
        for key, wv in ws.items():
            if key == "step":
                assert float(np.asarray(got[key])) == float(wv) == STEPS
                assert np.asarray(got[key]).dtype == np.float32 and np.asarray(got[key]).shape == ()
            else:
                worst = max(worst, rel_err(got[key], wv))
                assert rel_err(got[key], wv) <= TOL, (name, key)
    print("max relative error %s %s: %.2e" % (kind, hyper, worst))


def test_torch_foreach_agrees_too(client, uniq):
    """The single-tensor and foreach torch paths are the same rule; check one against tensord."""
    names, p0 = setup_params(client, uniq)
    grads = grad_seq(SHAPES)
    hyper = {"amsgrad": True, "weight_decay": 0.05}
    opt = client.optimizer("adamw", params=names, state=uniq + "/opt", **hyper)
    for gs in grads:
        opt.step(gs)
    want_p, _ = torch_run("adamw", p0, grads, dict(hyper, foreach=True))
    for name, wp in zip(names, want_p):
        assert rel_err(client.get(name), wp) <= TOL


# ---------------------------------------------------------------- Muon (float64 reference)

def muon_reference(p, grads, lr=1e-3, weight_decay=0.1, momentum=0.95, nesterov=True,
                   ns_coefficients=(3.4445, -4.7750, 2.0315), eps=1e-7, ns_steps=5, adjust_lr_fn="original"):
    p = p.astype(np.float64)
    buf = np.zeros_like(p)
    a, b, c = ns_coefficients
    rows, cols = p.shape
    for g in grads:
        g = g.astype(np.float64)
        buf = buf + (1 - momentum) * (g - buf)
        u = g + momentum * (buf - g) if nesterov else buf
        x = u.T if rows > cols else u
        x = x / max(np.linalg.norm(x), eps)
        for _ in range(ns_steps):
            gram = x @ x.T
            x = a * x + (b * gram + c * gram @ gram) @ x
        o = x.T if rows > cols else x
        ratio = 0.2 * np.sqrt(max(rows, cols)) if adjust_lr_fn == "match_rms_adamw" else np.sqrt(max(1, rows / cols))
        p = p * (1 - lr * weight_decay) - lr * ratio * o
    return p, buf


@pytest.mark.parametrize("hyper", [{}, {"nesterov": False, "lr": 0.02}, {"adjust_lr_fn": "match_rms_adamw"},
                                   {"ns_steps": 3, "weight_decay": 0.0, "momentum": 0.9}],
                         ids=["defaults", "no-nesterov", "match-rms", "ns3"])
def test_muon_matches_float64_reference(client, uniq, hyper):
    shapes = [(16, 40), (48, 12), (9, 9)]
    names, p0 = setup_params(client, uniq, shapes)
    grads = grad_seq(shapes, steps=3)
    opt = client.optimizer("muon", params=names, state=uniq + "/muon", **hyper)
    for gs in grads:
        opt.step(gs)
    state = opt.state()
    for i, name in enumerate(names):
        want_p, want_buf = muon_reference(p0[i], [gs[i] for gs in grads], **hyper)
        # Newton-Schulz runs in float32 (PyTorch: bfloat16); parameters stay within 2e-6.
        assert rel_err(client.get(name), want_p) <= TOL, name
        assert rel_err(state[name]["momentum_buffer"], want_buf) <= TOL, name
        assert sorted(state[name]) == ["momentum_buffer"]


# ---------------------------------------------------------------- bfloat16 parameters

def bf16_round(x):
    bits = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    bits = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16
    return bits.astype(np.uint32).view(np.float32)


def test_adamw_bf16_params_match_float32_math_rounded(client, uniq):
    shapes = [(300,), (17, 5)]
    rng = np.random.default_rng(3)
    names, p = [], []
    for i, s in enumerate(shapes):
        v = bf16_round(rng.standard_normal(s).astype(np.float32))
        names.append("%s/b%d" % (uniq, i))
        client.put(names[-1], v, dtype="bfloat16")
        p.append(v)
    m = [np.zeros_like(v) for v in p]
    v2 = [np.zeros_like(v) for v in p]
    lr, wd, b1, b2, eps = 1e-2, 1e-2, 0.9, 0.999, 1e-8
    opt = client.optimizer("adamw", params=names, state=uniq + "/o", lr=lr)
    for t in range(1, 4):
        gs = [bf16_round(rng.standard_normal(s).astype(np.float32)) for s in shapes]
        opt.step(gs)  # float32 arrays, sent as bfloat16 (the parameters' dtype)
        bc1, bc2 = 1 - b1 ** t, 1 - b2 ** t
        for i in range(len(p)):
            f = np.float32
            pi = p[i] * f(1 - lr * wd)
            mi = m[i] + f(1 - b1) * (gs[i] - m[i])
            vi = v2[i] * f(b2) + f(1 - b2) * gs[i] * gs[i]
            d = np.sqrt(vi) / f(np.sqrt(bc2)) + f(eps)
            pi = pi + f(-(lr / bc1)) * mi / d
            p[i], m[i], v2[i] = bf16_round(pi), bf16_round(mi), bf16_round(vi)
    state = opt.state()
    for i, name in enumerate(names):
        got = client.get(name)
        assert isinstance(got, TensorData) and got.dtype_name == "bfloat16"
        assert rel_err(got.to_float32(), p[i]) <= 4e-3  # at most ~1 bfloat16 ulp
        assert rel_err(as_f32(state[name]["exp_avg"]), m[i]) <= 4e-3
        assert rel_err(as_f32(state[name]["exp_avg_sq"]), v2[i]) <= 4e-3


# ---------------------------------------------------------------- client paths, AMP, state visibility

def test_grads_by_stored_name_and_state_is_stored(client, uniq):
    names, p0 = setup_params(client, uniq, [(10,), (3, 4)])
    grads = grad_seq([(10,), (3, 4)], steps=1)[0]
    for i, g in enumerate(grads):
        client.put("%s/g%d" % (uniq, i), g)
    opt = client.optimizer("adam", params=names, state=uniq + "/st", lr=0.1)
    opt.step(["%s/g0" % uniq, "%s/g1" % uniq])
    want_p, _ = torch_run("adam", p0, [grads], {"lr": 0.1})
    for name, wp in zip(names, want_p):
        assert rel_err(client.get(name), wp) <= TOL
    listed = {t["name"]: t for t in client.list(uniq + "/st/")}
    assert set(listed) == {"%s/st/%s/%s" % (uniq, n, k) for n in names for k in ("step", "exp_avg", "exp_avg_sq")}
    assert listed["%s/st/%s/exp_avg" % (uniq, names[1])]["bytes"] == 48
    assert client.head("%s/st/%s/step" % (uniq, names[0])) == ("float32", [])


def test_found_inf_skips_and_grad_scale_divides(client, uniq):
    names, _ = setup_params(client, uniq, [(8,)])
    g = grad_seq([(8,)], steps=1)[0]
    opt = client.optimizer("adam", params=names, state=uniq + "/amp", lr=0.1)
    opt.step(g)
    before = {k: as_f32(v) for k, v in opt.state()[names[0]].items()}
    p_before = client.get(names[0])
    opt.step([x * 4 for x in g], grad_scale=4.0, found_inf=1.0)
    assert np.array_equal(client.get(names[0]), p_before)
    after = {k: as_f32(v) for k, v in opt.state()[names[0]].items()}
    assert all(np.array_equal(before[k], after[k]) for k in before)
    # grad_scale 4 with 4x gradients equals the unscaled step
    other = uniq + "/twin"
    client.put(other, p_before)
    twin = client.optimizer("adam", params=[other], lr=0.1, state=uniq + "/amp2")
    twin.step(g)  # step 1 on the twin, to line up the step counts
    client.put(other, p_before)
    twin.step(g)
    opt.step([x * 4 for x in g], grad_scale=4.0, found_inf=0.0)
    assert np.array_equal(client.get(names[0]), client.get(other))


# ---------------------------------------------------------------- malformed input: 422 and nothing changes

def snapshot(client, uniq):
    return {t["name"]: as_f32(client.get(t["name"])).copy() for t in client.list(uniq + "/")}


def expect_unchanged(client, uniq, before):
    after = snapshot(client, uniq)
    assert sorted(after) == sorted(before)
    for k in before:
        assert np.array_equal(after[k], before[k]), k


def step_program(op, params, grads, **kwargs):
    return {"nodes": [{"id": "step", "op": op, "args": [params, grads], "kwargs": kwargs, "outputs": []}],
            "outputs": []}


BAD = [
    ("lists of different lengths", "optim.adam", 2, 1, {}, (3,), "invalid_argument"),
    ("shape mismatch", "optim.adam", 1, 1, {}, (4,), "shape_mismatch"),
    ("non-stored param", "optim.adam", -1, 1, {}, (3,), "invalid_argument"),
    ("lr < 0", "optim.adam", 1, 1, {"lr": -1e-3}, (3,), "invalid_argument"),
    ("beta >= 1", "optim.adamw", 1, 1, {"betas": [0.9, 1.0]}, (3,), "invalid_argument"),
    ("nesterov with dampening", "optim.sgd", 1, 1, {"momentum": 0.9, "dampening": 0.1, "nesterov": True}, (3,),
     "invalid_argument"),
    ("muon on 1-D", "optim.muon", 1, 1, {}, (3,), "invalid_argument"),
    ("adagrad negative lr_decay", "optim.adagrad", 1, 1, {"lr_decay": -1.0}, (3,), "invalid_argument"),
]


@pytest.mark.parametrize("what,op,nparams,ngrads,kwargs,gshape,code", BAD, ids=[b[0] for b in BAD])
def test_malformed_is_422_and_changes_nothing(client, uniq, what, op, nparams, ngrads, kwargs, gshape, code):
    client.put(uniq + "/a", np.arange(3, dtype=np.float32))
    client.put(uniq + "/b", np.arange(3, dtype=np.float32) + 10)
    # a first good step creates state, so "unchanged" covers state too
    if op != "optim.muon":
        good = {"state": uniq + "/s"} if op != "optim.sgd" else {"state": uniq + "/s", "momentum": 0.9}
        client.run(step_program(op, ["$stored/%s/a" % uniq], ["g"], **good),
                   inputs={"g": np.ones(3, np.float32)})
    before = snapshot(client, uniq)
    params = ["$stored/%s/a" % uniq, "$stored/%s/b" % uniq][:max(nparams, 1)]
    inputs = {"g%d" % i: np.ones(gshape, np.float32) for i in range(ngrads)}
    if nparams < 0:
        params = ["p"]
        inputs["p"] = np.arange(3, dtype=np.float32)
    kwargs = dict(kwargs, state=uniq + "/s")
    with pytest.raises(TensordError) as ei:
        client.run(step_program(op, params, sorted(k for k in inputs if k.startswith("g")), **kwargs), inputs=inputs)
    e = ei.value
    assert e.status == 422, e
    assert e.code == code, e
    assert e.node == "step", e
    expect_unchanged(client, uniq, before)


def test_runtime_failure_in_a_later_node_commits_nothing(client, uniq):
    """Node 1 steps w1; node 2 fails in its kernel (state of the wrong shape): w1 and its state stay."""
    client.put(uniq + "/w1", np.ones(4, np.float32))
    client.put(uniq + "/w2", np.ones(4, np.float32))
    client.put(uniq + "/s/%s/w2/exp_avg" % uniq, np.zeros(5, np.float32))
    before = snapshot(client, uniq)
    prog = {"nodes": [
        {"id": "a", "op": "optim.adam", "args": [["$stored/%s/w1" % uniq], ["g"]], "kwargs": {"state": uniq + "/s"},
         "outputs": []},
        {"id": "b", "op": "optim.adam", "args": [["$stored/%s/w2" % uniq], ["g"]], "kwargs": {"state": uniq + "/s"},
         "outputs": []}], "outputs": []}
    with pytest.raises(TensordError) as ei:
        client.run(prog, inputs={"g": np.ones(4, np.float32)})
    assert ei.value.status == 422 and ei.value.code == "invalid_argument" and ei.value.node == "b"
    expect_unchanged(client, uniq, before)


def test_ops_are_listed(client):
    names = {o["name"] for o in client.ops()["ops"]} if isinstance(client.ops(), dict) else set()
    for op in ("optim.sgd", "optim.adam", "optim.adamw", "optim.adagrad", "optim.muon"):
        assert op in names
