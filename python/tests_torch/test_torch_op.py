"""attn.torch against PyTorch 2's own scaled_dot_product_attention: the same results and
gradients, the operator's registration (opcheck), torch.compile without a graph break,
zero-copy inputs, threads, and clear errors. Run with the venv that scripts/bootstrap --python
makes (torch==2.13.0 from PyPI)."""
import threading

import pytest
import torch
import torch.nn.functional as F

import attn
import attn.torch as at
from attention_formulas import masked_reference, record_kernel_calls

TOL = dict(atol=2e-5, rtol=2e-5)


def qkv(batch=2, heads=4, kv_heads=None, tq=37, tk=None, d=16, dtype=torch.float32, grad=False,
        seed=0):
    g = torch.Generator().manual_seed(seed)
    kv_heads = kv_heads or heads
    tk = tk or tq
    q = torch.randn(batch, heads, tq, d, generator=g, dtype=dtype)
    k = torch.randn(batch, kv_heads, tk, d, generator=g, dtype=dtype)
    v = torch.randn(batch, kv_heads, tk, d, generator=g, dtype=dtype)
    return [t.requires_grad_(grad) for t in (q, k, v)]


CASES = {
    "plain": dict(),
    "causal": dict(is_causal=True),
    "causal Tq<Tk": dict(is_causal=True, shape=dict(tq=5, tk=40)),
    "causal Tq>Tk": dict(is_causal=True, shape=dict(tq=40, tk=9)),
    "bool mask": dict(mask="bool"),
    "float mask": dict(mask="float"),
    "scale": dict(scale=0.3, is_causal=True),
    "gqa": dict(enable_gqa=True, is_causal=True, shape=dict(heads=8, kv_heads=2)),
    "rank 3": dict(shape=dict(batch=None)),
    "one query": dict(is_causal=True, shape=dict(tq=1, tk=1)),
    "long": dict(is_causal=True, shape=dict(batch=1, heads=2, tq=300, d=64)),
}


def make_case(name, grad=False):
    c = CASES[name]
    shape = dict(c.get("shape", {}))
    batch = shape.pop("batch", 2)
    q, k, v = qkv(batch=batch or 1, grad=grad, **shape)
    if batch is None:
        q, k, v = (t.detach()[0].requires_grad_(grad) for t in (q, k, v))
    kwargs = {key: c[key] for key in ("is_causal", "scale", "enable_gqa") if key in c}
    tq, tk = q.shape[-2], k.shape[-2]
    g = torch.Generator().manual_seed(7)
    if c.get("mask") == "bool":
        mask = torch.rand(tq, tk, generator=g) > 0.4
        mask[:, 0] = True  # every row sees a key: PyTorch gives NaN for a row that sees none
        kwargs["attn_mask"] = mask
    elif c.get("mask") == "float":
        kwargs["attn_mask"] = torch.randn(tq, tk, generator=g)
    return (q, k, v), kwargs


@pytest.mark.parametrize("name", list(CASES))
def test_forward_is_pytorchs(name):
    (q, k, v), kwargs = make_case(name)
    torch.testing.assert_close(at.scaled_dot_product_attention(q, k, v, **kwargs),
                               F.scaled_dot_product_attention(q, k, v, **kwargs), **TOL)


@pytest.mark.parametrize("name", list(CASES))
def test_gradients_are_pytorchs(name):
    (q, k, v), kwargs = make_case(name, grad=True)
    out = at.scaled_dot_product_attention(q, k, v, **kwargs)
    grad = torch.randn_like(out)
    ours = torch.autograd.grad(out, (q, k, v), grad)
    theirs = torch.autograd.grad(F.scaled_dot_product_attention(q, k, v, **kwargs), (q, k, v), grad)
    for a, b in zip(ours, theirs):
        torch.testing.assert_close(a, b, **TOL)


@pytest.mark.parametrize("name", ["plain", "causal", "causal Tq<Tk", "bool mask", "float mask",
                                  "gqa", "rank 3"])
def test_the_operator_passes_opcheck(name):
    (q, k, v), kwargs = make_case(name, grad=True)
    torch.library.opcheck(torch.ops.attn.sdpa.default,
                          (q, k, v, kwargs.get("attn_mask"), kwargs.get("is_causal", False),
                           kwargs.get("scale")))


@pytest.mark.parametrize("name", ["causal", "float mask", "gqa"])
def test_the_operator_passes_opcheck_in_bfloat16(name):
    (q, k, v), kwargs = make_case(name, grad=True)
    q, k, v = (t.detach().bfloat16().requires_grad_(True) for t in (q, k, v))
    mask = kwargs.get("attn_mask")
    torch.library.opcheck(torch.ops.attn.sdpa.default,
                          (q, k, v, mask, kwargs.get("is_causal", False), kwargs.get("scale")))


def test_bfloat16_runs_the_bf16_products_and_returns_bfloat16():
    q, k, v = qkv(dtype=torch.bfloat16)
    for t in (q, k, v):
        t.requires_grad_(True)
    out = at.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert out.dtype == torch.bfloat16
    # Exactly attn's bf16 products on the same (bfloat16) values, rounded back to bfloat16.
    products = attn.sdpa(q.detach().float().numpy(), k.detach().float().numpy(),
                         v.detach().float().numpy(), causal=True, causal_align="top-left",
                         precision="bf16")
    assert torch.equal(out.detach(), torch.from_numpy(products).bfloat16())
    # Near PyTorch's own bf16 attention and the float64 answer.
    exact = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=True)
    torch_bf16 = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    torch.testing.assert_close(out.double(), exact, atol=2e-2, rtol=2e-2)
    torch.testing.assert_close(out.float(), torch_bf16.float(), atol=2e-2, rtol=2e-2)
    # The backward in bf16 too: near PyTorch's bf16 backward and the float64 gradients.
    g = torch.randn_like(out)
    mine = torch.autograd.grad(out, (q, k, v), g, retain_graph=True)
    theirs = torch.autograd.grad(torch_bf16, (q, k, v), g)
    exact_grads = torch.autograd.grad(exact, (q, k, v), g.double())
    for a, b, c in zip(mine, theirs, exact_grads):
        assert a.dtype == torch.bfloat16
        torch.testing.assert_close(a.float(), b.float(), atol=5e-2, rtol=5e-2)
        torch.testing.assert_close(a.float(), c.float(), atol=5e-2, rtol=5e-2)


@pytest.mark.parametrize("name", ["plain", "causal", "float mask", "bool mask", "gqa"])
def test_autocast_runs_the_bf16_products_as_pytorchs_sdpa_does(name):
    """Inside torch.autocast("cpu") PyTorch's SDPA casts float32 inputs to bfloat16: attn gives
    the same dtype, exactly what it gives those inputs cast by hand, and float32 gradients for
    float32 leaves (autograd casts them back)."""
    (q, k, v), kwargs = make_case(name, grad=True)
    with torch.autocast("cpu"):
        out = at.scaled_dot_product_attention(q, k, v, **kwargs)
        theirs = F.scaled_dot_product_attention(q, k, v, **kwargs)
    assert out.dtype == theirs.dtype == torch.bfloat16
    by_hand = {key: (value.bfloat16() if key == "attn_mask" and value.is_floating_point()
                     else value) for key, value in kwargs.items()}
    cast = [t.detach().bfloat16().requires_grad_() for t in (q, k, v)]
    expected = at.scaled_dot_product_attention(*cast, **by_hand)
    assert torch.equal(out, expected)
    torch.testing.assert_close(out.float(), theirs.float(), atol=2e-2, rtol=2e-2)
    g = torch.randn_like(out)
    grads = torch.autograd.grad(out, (q, k, v), g)
    expected_grads = torch.autograd.grad(expected, cast, g)
    for a, b in zip(grads, expected_grads):
        assert a.dtype == torch.float32
        assert torch.equal(a, b.float())


def test_autocast_to_float16_and_float64_inputs_follow_pytorch():
    q, k, v = qkv()
    with torch.autocast("cpu", dtype=torch.float16):
        assert at.scaled_dot_product_attention(q, k, v).dtype == torch.float16
        assert at.attention(q, k, v, softcap=5.0).dtype == torch.float16
        assert at.scaled_dot_product_attention(q.double(), k.double(), v.double()).dtype == \
            F.scaled_dot_product_attention(q.double(), k.double(), v.double()).dtype
    with torch.autocast("cpu", enabled=False):
        assert at.scaled_dot_product_attention(q, k, v).dtype == torch.float32


def test_autocast_in_a_compiled_model_traces_without_a_graph_break():
    torch.manual_seed(0)
    model = TinyAttention()
    q, k, v = qkv(grad=True)
    compiled = torch.compile(model, fullgraph=True, backend="eager")
    with torch.autocast("cpu"):
        eager = model(q, k, v)
        out = compiled(q, k, v)
    assert out.dtype == eager.dtype == torch.bfloat16
    assert torch.equal(out, eager)


def test_a_gradient_of_a_gradient_is_refused_by_name():
    """attn's backward is not differentiable (nor is PyTorch's fused CPU kernel's): the first
    gradient with create_graph=True is the usual one; differentiating it says why it cannot."""
    q, k, v = qkv(grad=True)
    out = at.scaled_dot_product_attention(q, k, v, is_causal=True)
    first, = torch.autograd.grad(out.sum(), q, create_graph=True)
    plain, = torch.autograd.grad(at.scaled_dot_product_attention(q, k, v, is_causal=True).sum(), q)
    assert torch.equal(first.detach(), plain)
    with pytest.raises(NotImplementedError, match="gradient of a gradient"):
        first.pow(2).sum().backward()
    rows = [t.detach()[0].transpose(0, 1).contiguous().requires_grad_() for t in (q, k, v)]
    offsets = torch.tensor([0, 37], dtype=torch.int32)
    out = at.varlen_attention(*rows, offsets, offsets, 37, 37, window_size=(-1, 0))
    first, = torch.autograd.grad(out.sum(), rows[0], create_graph=True)
    with pytest.raises(NotImplementedError, match="gradient of a gradient"):
        first.sum().backward()


@pytest.mark.parametrize("name", list(CASES))
def test_bfloat16_is_read_in_place_and_is_the_widened_products(name, monkeypatch):
    """bfloat16 tensors go to the kernels as they are (one call of the module's bf16 entry, no
    float32 copy) and give, bit for bit, attn's bf16 products on the values widened to float32,
    rounded back to bfloat16."""
    (q, k, v), kwargs = make_case(name)
    q, k, v = (t.bfloat16() for t in (q, k, v))
    calls = []
    entry = attn._attn._torch_sdpa_bfloat16
    monkeypatch.setattr(attn._attn, "_torch_sdpa_bfloat16",
                        lambda *args: calls.append(name) or entry(*args))
    out = at.scaled_dot_product_attention(q, k, v, **kwargs)
    assert calls == [name] and out.dtype == torch.bfloat16
    mask = kwargs.get("attn_mask")
    widened = attn.sdpa(*(t.float().numpy() for t in (q, k, v)),
                        causal=kwargs.get("is_causal", False), causal_align="top-left",
                        mask=None if mask is None else mask.numpy(), scale=kwargs.get("scale"),
                        precision="bf16")
    assert torch.equal(out, torch.from_numpy(widened).bfloat16())


@pytest.mark.parametrize("name", list(CASES))
def test_bfloat16_gradients_are_read_in_place_and_are_the_widened_products(name, monkeypatch):
    """The backward on bfloat16 tensors reads them as they are too, and its gradients are attn's
    bf16-product gradients of the widened values, rounded to bfloat16, bit for bit."""
    (q, k, v), kwargs = make_case(name)
    q, k, v = (t.bfloat16().requires_grad_(True) for t in (q, k, v))
    calls = []
    entry = attn._attn._torch_sdpa_backward_bfloat16
    monkeypatch.setattr(attn._attn, "_torch_sdpa_backward_bfloat16",
                        lambda *args: calls.append(name) or entry(*args))
    out = at.scaled_dot_product_attention(q, k, v, **kwargs)
    grad = torch.randn(out.shape, generator=torch.Generator().manual_seed(9)).bfloat16()
    dq, dk, dv = torch.autograd.grad(out, (q, k, v), grad)
    assert calls == [name] and dq.dtype == torch.bfloat16
    mask = kwargs.get("attn_mask")
    settings = dict(causal=kwargs.get("is_causal", False), causal_align="top-left",
                    mask=None if mask is None else mask.numpy(), scale=kwargs.get("scale"),
                    precision="bf16")
    floats = [t.detach().float().numpy() for t in (q, k, v)]
    _, lse = attn.sdpa(*floats, return_lse=True, **settings)
    widened = attn.sdpa_backward(*floats, out.detach().float().numpy(), lse,
                                 grad.float().numpy(), **settings)
    for got, expected in zip((dq, dk, dv), widened):
        assert torch.equal(got, torch.from_numpy(expected).bfloat16())


def test_bfloat16_views_are_read_through_their_strides_and_offset():
    # transformers' layout in bfloat16: (batch, time, heads, d) seen heads first, k and v
    # starting past the storage's first element.
    g = torch.Generator().manual_seed(5)
    packed = torch.randn(2, 70, 3 * 4, 64, generator=g).bfloat16()
    q, k, v = (packed[:, :, i * 4:(i + 1) * 4].transpose(1, 2) for i in range(3))
    assert k.storage_offset() > 0 and not q.is_contiguous()
    for causal in (False, True):
        out = at.scaled_dot_product_attention(q, k, v, is_causal=causal)
        contiguous = at.scaled_dot_product_attention(*(t.contiguous() for t in (q, k, v)),
                                                     is_causal=causal)
        assert torch.equal(out, contiguous)
        torch.testing.assert_close(out.float(), F.scaled_dot_product_attention(
            q, k, v, is_causal=causal).float(), atol=2e-2, rtol=2e-2)


def test_bfloat16_inputs_with_nan_are_a_value_error():
    q, k, v = qkv(dtype=torch.bfloat16)
    k[1, 2, 3, 4] = float("nan")
    with pytest.raises(ValueError, match="k holds nan"):
        at.scaled_dot_product_attention(q, k, v, is_causal=True)


class TinyAttention(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(16, 16)

    def forward(self, q, k, v):
        return self.proj(at.scaled_dot_product_attention(q, k, v, is_causal=True))


def test_torch_compile_traces_it_without_a_graph_break():
    torch.manual_seed(0)
    model = TinyAttention()
    q, k, v = qkv(grad=True)
    assert torch._dynamo.explain(model)(q, k, v).graph_break_count == 0
    eager = model(q, k, v)
    eager_grads = torch.autograd.grad(eager.sum(), (q, k, v))
    compiled = torch.compile(model, fullgraph=True)
    out = compiled(q, k, v)
    torch.testing.assert_close(out, eager, **TOL)
    for a, b in zip(torch.autograd.grad(out.sum(), (q, k, v)), eager_grads):
        torch.testing.assert_close(a, b, **TOL)


def test_torch_export_keeps_the_operator_through_save_load_and_dynamic_shapes(tmp_path):
    """torch.export (the ahead-of-time path) records attn's operator in the program; the
    program saved and loaded back runs it, at a sequence length other than the traced one."""
    torch.manual_seed(0)
    model = TinyAttention()
    q, k, v = qkv()
    length = torch.export.Dim("length", min=2, max=512)
    shapes = {name: {2: length} for name in ("q", "k", "v")}
    program = torch.export.export(model, (q, k, v), dynamic_shapes=shapes)
    assert "attn.sdpa" in str(program.graph)
    torch.export.save(program, tmp_path / "tiny.pt2")
    loaded = torch.export.load(tmp_path / "tiny.pt2").module()
    for tq in (37, 100):
        q, k, v = qkv(tq=tq, seed=tq)
        torch.testing.assert_close(loaded(q, k, v), model(q, k, v), **TOL)


def test_float32_inputs_are_read_in_place_and_the_output_is_attns_memory():
    q, k, v = qkv()
    before = attn._conversions()
    view = q.transpose(1, 2).contiguous().transpose(1, 2)  # strided, last dim contiguous
    out = at.scaled_dot_product_attention(view, k, v)
    assert attn._conversions() == before
    assert out.numpy().base is not None  # a view of the array attn returned, not a copy
    assert at.scaled_dot_product_attention(q.double(), k.double(), v.double()).dtype == \
        torch.float64


def test_the_quick_path_is_taken_only_for_plain_float32_inference(monkeypatch):
    """Plain float32 CPU tensors with no mask and no gradient go through one call into the module
    (positional, read in place); anything else takes the general path, with its checks."""
    taken = []
    quick = attn._attn._torch_plain_sdpa

    def counting(*args):
        out = quick(*args)
        taken.append(out is not None)
        return out

    monkeypatch.setattr(attn._attn, "_torch_plain_sdpa", counting)
    q, k, v = qkv()
    with torch.no_grad():
        got = at.scaled_dot_product_attention(q, k, v, is_causal=True)
    torch.testing.assert_close(got, F.scaled_dot_product_attention(q, k, v, is_causal=True), **TOL)
    assert taken == [True]
    kv_few = k[:, :2].contiguous()  # 2 heads for 4 (1 would broadcast, as in PyTorch)
    with pytest.raises(ValueError, match="enable_gqa=True"):  # the quick path declines, then
        at.scaled_dot_product_attention(q, kv_few, kv_few)   # the general one says why
    assert taken == [True, False]
    at.scaled_dot_product_attention(q.bfloat16(), k.bfloat16(), v.bfloat16())  # bf16's own entry
    at.scaled_dot_product_attention(q, k, v, attn_mask=torch.ones(37, 37, dtype=torch.bool))
    q.requires_grad_(True)
    at.scaled_dot_product_attention(q, k, v)  # the operator, for autograd
    assert taken == [True, False, False]


def test_views_are_read_through_their_strides_and_offset():
    # The layout transformers hands over: (batch, time, heads, d) transposed to heads first,
    # and a slice that starts past the storage's first element. attn reads the tensor's own
    # pointer, sizes and strides (no numpy, no copy): a wrong stride or offset is a wrong answer.
    g = torch.Generator().manual_seed(3)
    packed = torch.randn(2, 21, 3 * 4, 16, generator=g)  # q, k, v side by side per position
    q, k, v = (packed[:, :, i * 4:(i + 1) * 4].transpose(1, 2) for i in range(3))
    assert q.storage_offset() == 0 and k.storage_offset() > 0 and not q.is_contiguous()
    before = attn._conversions()
    for causal in (False, True):
        torch.testing.assert_close(at.scaled_dot_product_attention(q, k, v, is_causal=causal),
                                   F.scaled_dot_product_attention(q, k, v, is_causal=causal),
                                   **TOL)
    assert attn._conversions() == before


@pytest.mark.parametrize("tq, causal", [(1, False), (5, True), (15, True)])
def test_a_few_rows_against_many_keys_are_pytorchs(tq, causal):
    # The decode kernel's route (a query row, or a few at the end of the keys): keys over two
    # of its 512-position chunks, so the merge of the partial softmax states is exercised.
    q, k, v = qkv(batch=2, heads=8, kv_heads=2, tq=tq, tk=1100, d=64)
    mask = torch.ones(tq, 1100, dtype=torch.bool).tril(1100 - tq) if causal else None
    ours = torch.from_numpy(attn.sdpa(q.numpy(), k.numpy(), v.numpy(), causal=causal))
    theirs = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
    torch.testing.assert_close(ours, theirs, **TOL)
    if not causal:
        torch.testing.assert_close(at.scaled_dot_product_attention(q, k, v, enable_gqa=True),
                                   theirs, **TOL)


def test_a_row_that_sees_no_key_is_zeros_as_in_pytorch():
    q, k, v = qkv(tq=4, tk=4)
    mask = torch.ones(4, 4, dtype=torch.bool)
    mask[2] = False
    ours = at.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    assert torch.all(ours[:, :, 2] == 0)
    torch.testing.assert_close(ours, F.scaled_dot_product_attention(q, k, v, attn_mask=mask),
                               **TOL)


def test_two_threads_at_once_get_one_threads_answers():
    cases = [make_case(name)[0] + (make_case(name)[1],) for name in ("causal", "gqa", "bool mask")]
    alone = [at.scaled_dot_product_attention(q, k, v, **kw) for q, k, v, kw in cases]
    wrong = []

    def work(offset):
        for i in range(60):
            j = (i + offset) % len(cases)
            q, k, v, kw = cases[j]
            if not torch.equal(at.scaled_dot_product_attention(q, k, v, **kw), alone[j]):
                wrong.append(j)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert wrong == []


@pytest.mark.parametrize("call,error,match", [
    (lambda q: at.scaled_dot_product_attention(q, q, q, dropout_p=0.1), ValueError, "dropout_p"),
    (lambda q: at.scaled_dot_product_attention(q, q, q, is_causal=True,
                                               attn_mask=torch.ones(37, 37, dtype=torch.bool)),
     ValueError, "cannot both be set"),
    (lambda q: at.scaled_dot_product_attention(q, q[:, :2], q[:, :2]), ValueError, "enable_gqa"),
    (lambda q: at.scaled_dot_product_attention(q.to("meta"), q.to("meta"), q.to("meta")),
     ValueError, "is on meta"),
    (lambda q: at.scaled_dot_product_attention(q.int(), q, q), TypeError, "floating-point"),
    (lambda q: at.scaled_dot_product_attention(q, q.bfloat16(), q), ValueError, "same dtype"),
    (lambda q: at.attention(q, q, q.double(), softcap=5.0), ValueError, "same dtype"),
    (lambda q: at.scaled_dot_product_attention(q, q, q, attn_mask=torch.zeros(37, 37).double()),
     ValueError, "float32 or query's dtype"),
    (lambda q: at.scaled_dot_product_attention(q * float("nan"), q, q), ValueError,
     "query holds nan|q holds nan"),
])
def test_bad_calls_are_clear_errors(call, error, match):
    q, _, _ = qkv()
    with pytest.raises(error, match=match):
        call(q)


@pytest.mark.parametrize("shape", [(37, 37), (4, 1, 37), (2, 1, 37, 37), (2, 4, 37, 37)])
def test_a_float_mask_that_needs_a_gradient_gets_pytorchs(shape):
    """A learned bias: its gradient (dS summed over the dims it is broadcast along) against
    PyTorch's own autograd of the same call."""
    q, k, v = qkv(grad=True)
    mask = torch.randn(*shape, generator=torch.Generator().manual_seed(3)).requires_grad_()
    out = at.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    grad = torch.randn_like(out)
    ours = torch.autograd.grad(out, (q, k, v, mask), grad)
    theirs = torch.autograd.grad(F.scaled_dot_product_attention(q, k, v, attn_mask=mask),
                                 (q, k, v, mask), grad)
    for a, b in zip(ours, theirs):
        torch.testing.assert_close(a, b, **TOL)


@pytest.mark.parametrize("causal", [False, True])
def test_gradients_match_finite_differences(causal):
    # attn computes in float32: float64 inputs are converted, so the finite differences use a
    # step and tolerances that float32's rounding allows (gradcheck's defaults assume float64).
    q, k, v = (t.double().requires_grad_() for t in qkv(batch=1, heads=2, tq=6, d=4, seed=3))
    assert torch.autograd.gradcheck(
        lambda q, k, v: at.scaled_dot_product_attention(q, k, v, is_causal=causal), (q, k, v),
        eps=1e-3, atol=2e-3, rtol=2e-3)


@pytest.mark.parametrize("case", ["causal", "causal Tq<Tk", "gqa", "softcap", "sinks",
                                  "float mask"])
def test_the_weights_gradients_match_finite_differences(case):
    """attn.torch._weights (attn.hf's output_attentions) differentiates the softmax in PyTorch:
    to query and key, through the cap, to the sinks and to a float mask. float32 inside, hence
    float32's step and tolerances."""
    tq, tk = (3, 7) if case == "causal Tq<Tk" else (6, 6)
    q, k, v = (t.double() for t in qkv(batch=1, heads=4, kv_heads=2 if case == "gqa" else 4,
                                       tq=tq, tk=tk, d=4, seed=3))
    inputs = [q.requires_grad_(), k.requires_grad_()]
    options = dict(softcap=2.0 if case == "softcap" else 0.0)
    mask = sinks = None
    if case == "float mask":
        mask = torch.randn(tq, tk, dtype=torch.float64, requires_grad=True)
        inputs.append(mask)
    if case == "sinks":
        sinks = torch.randn(4, dtype=torch.float64, requires_grad=True)
        inputs.append(sinks)

    def weights(q, k, *rest):
        m = rest[0] if mask is not None else None
        s = rest[-1] if sinks is not None else None
        return at._weights(q, k, v, m, mask is None, None, sinks=s, **options)
    assert torch.autograd.gradcheck(weights, inputs, eps=1e-3, atol=2e-3, rtol=2e-3)


def test_a_causal_or_padding_mask_runs_as_causal_inside_the_operator(monkeypatch):
    """A boolean mask that is causal apart from each batch entry's leading padding keys (what
    transformers builds for a padded batch, and hands attn as it is under torch.compile), or a
    (T, T) tril mask, reaches the kernels as is_causal with the first real keys — they skip the
    blocks instead of reading the mask — in the forward and the backward, with the answers and
    gradients the mask asks for. So do a static cache's masks, whose last keys are slots not yet
    written: a padded prompt (Tq < Tk) as causal key starts, a cached step (one row) as key
    starts and key lengths. A mask one element off stays a mask."""
    seen = []
    for entry in ("sdpa", "sdpa_backward"):
        record_kernel_calls(monkeypatch, entry, lambda args, kw, entry=entry: (
            entry, kw["mask"] is None, kw["causal"], kw["key_starts"], kw["key_lengths"]), seen)
    t = 70
    tril = torch.ones(t, t, dtype=torch.bool).tril()
    padded = tril[None, None].repeat(2, 1, 1, 1)
    padded[1, :, :, :9] = False  # entry 1: nine padding keys, its first nine rows see none
    off = padded.clone()
    off[0, 0, 5, 6] = True  # one key past the diagonal
    prompt = torch.zeros(2, 1, 30, t, dtype=torch.bool)  # 30 prompt rows, 70 cache slots
    prompt[:, :, :, :30] = padded[:, :, :30, :30]
    step = torch.zeros(2, 1, 1, t, dtype=torch.bool)  # one row at position 40 of the cache
    step[0, :, :, :41] = True
    step[1, :, :, 9:41] = True
    cases = ((tril, 70, (True, True, None, None)), (padded, 70, (True, True, [0, 9], None)),
             (off, 70, (False, False, None, None)), (prompt, 30, (True, True, [0, 9], None)),
             (step, 1, (True, False, [0, 9], [41, 41])))
    for mask, tq, kernels_see in cases:
        seen.clear()
        q, k, v = qkv(tq=tq, tk=t, grad=True, seed=3)
        out = at.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        grad = torch.randn(out.shape, generator=torch.Generator().manual_seed(4))
        got = torch.autograd.grad(out, (q, k, v), grad)
        expected_out = masked_reference(q, k, v, mask)
        expected = torch.autograd.grad(expected_out, (q, k, v), grad.double())
        torch.testing.assert_close(out.double(), expected_out, **TOL)
        for a, b in zip(got, expected):
            torch.testing.assert_close(a.double(), b.double(), **TOL)
        assert seen == [("sdpa",) + kernels_see, ("sdpa_backward",) + kernels_see], seen


def test_a_mask_of_packed_documents_runs_as_one_varlen_call_inside_the_operator(monkeypatch):
    """A boolean (batch, 1, T, T) mask of documents packed end to end, each causal (transformers'
    mask for restarting position_ids, handed on as it is under torch.compile), with or without a
    sliding window, reaches the varlen kernels over the batch's rows with the documents' offsets,
    forward and backward, under GQA: the answers and gradients the mask asks for."""
    seen = []
    for entry in ("sdpa_varlen", "sdpa_varlen_backward"):
        record_kernel_calls(monkeypatch, entry,
                            lambda args, kw, entry=entry: (entry, args[-2], kw["window"]), seen)
    t = 50
    mask = torch.zeros(2, 1, t, t, dtype=torch.bool)
    for b, lengths in enumerate(((20, 30), (7, 33, 10))):
        start = 0
        for n in lengths:
            mask[b, 0, start:start + n, start:start + n] = torch.ones(n, n, dtype=torch.bool).tril()
            start += n
    windowed = mask & ~torch.ones(t, t, dtype=torch.bool).tril(-6)  # the last 6 keys only
    for m, window in ((mask, None), (windowed, 6)):
        seen.clear()
        q, k, v = qkv(heads=4, kv_heads=2, tq=t, grad=True, seed=5)
        out = at.scaled_dot_product_attention(q, k, v, attn_mask=m, enable_gqa=True)
        grad = torch.randn(out.shape, generator=torch.Generator().manual_seed(6))
        got = torch.autograd.grad(out, (q, k, v), grad)
        k_all, v_all = (x.repeat_interleave(2, dim=1) for x in (k, v))
        expected_out = masked_reference(q, k_all, v_all, m)
        expected = torch.autograd.grad(expected_out, (q, k, v), grad.double())
        torch.testing.assert_close(out.double(), expected_out, **TOL)
        for a, b in zip(got, expected):
            torch.testing.assert_close(a.double(), b.double(), **TOL)
        offsets = [0, 20, 50, 57, 90, 100]
        assert seen == [("sdpa_varlen", offsets, window),
                        ("sdpa_varlen_backward", offsets, window)], seen
