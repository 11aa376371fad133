"""attn's fused attention on PyTorch tensors: `import attn.torch`.

`attn.torch.scaled_dot_product_attention` takes PyTorch 2's arguments with PyTorch's meaning
(`is_causal` aligned top-left, a boolean `attn_mask` True where a query may attend, a float one
added to the scores, grouped K/V heads only with `enable_gqa=True`), so it replaces
`torch.nn.functional.scaled_dot_product_attention` on CPU tensors in one line. It is the
custom operator `torch.ops.attn.sdpa` (output and logsumexp), registered with a fake
implementation, so `torch.compile(fullgraph=True)` traces through it, and with autograd, whose
backward is attn's fused backward from the saved logsumexp. `attn.torch.attention` is the same
call with the score variants of today's models: soft-capping, ALiBi and attention sinks (whose
gradient autograd gets from attn's fused backward). `with attn.torch.replace_sdpa():` runs
unchanged code's `F.scaled_dot_product_attention` calls on attn (_torch_mode.py).

- Memory: float32 CPU tensors whose last dim is contiguous are read in place (no copy, not
  even a numpy view: the module reads the tensor's pointer, sizes and strides) and the output
  is the memory attn wrote; other float dtypes, and tensors whose last dim is strided (an
  expanded gradient), are copied once.
- bfloat16 tensors run attn's bf16 products (q, k, v and the weights rounded to bfloat16 for
  the products, sums and softmax in float32: `attn.sdpa(..., precision="bf16")`). The forward
  reads bfloat16 q, k and v in place and writes its bfloat16 output directly (on a CPU with AMX
  or AVX-512 BF16 the kernels read the words themselves; elsewhere attn widens them first, with
  the same result); so does the backward, whose gradients (float32 sums) are rounded to
  bfloat16 as the kernel finishes their rows, written into the bfloat16 tensors it returns
  (no float32 copy of dK or dV is made). float16 and float64 are computed in float32 (returned in their own dtype). query,
  key and value of different dtypes are a ValueError, as in PyTorch.
- Inside `torch.autocast("cpu")` the attention functions cast as PyTorch's SDPA does there:
  float32 (and float16) query, key, value and float mask to the autocast dtype, bfloat16 by
  default, so the bf16 products run and the output is bfloat16; autograd casts the gradients
  back. varlen_attention, like PyTorch's varlen_attn, takes its inputs' dtype as it is.
- A query row that may attend to no key gives zeros, as PyTorch 2.13's CPU kernel does.
- Shapes as PyTorch takes them: (..., L, E) with any number of leading dims, broadcast between
  query, key and value (a key with one head serves every query head); an input with none of
  some dim gives PyTorch's result (an empty output, or zeros when there are no keys) and zero
  gradients, without calling the kernels.
- A float attn_mask that requires a gradient (a learned bias) gets one: dS, summed over the dims
  it is broadcast along, from attn's fused backward.
- `torch.vmap` works through the operators (one kernel call per mapped index). torch.func.grad
  does not: PyTorch 2.13's custom operators lack the autograd hook its transforms need
  (pytorch/pytorch#168393); torch.autograd is the way to attn's backward.
- The GIL is released while the kernels run.
"""
import math
import weakref
from typing import Optional, Tuple

import numpy as np
import torch

from . import _attn

__all__ = ["scaled_dot_product_attention", "attention", "varlen_attention",
           "varlen_attention_out", "replace_sdpa"]

# float32 and bfloat16 CPU tensors: read in place
_attn._set_torch_types(torch.Tensor, torch.float32, torch.bfloat16)


def _check_cpu(t: torch.Tensor, name: str) -> None:
    if t.device.type != "cpu":
        raise ValueError(f"attn.torch: {name} is on {t.device}; attn runs on the CPU only "
                         "(move it with .cpu())")


def _as_input(t: torch.Tensor, name: str) -> torch.Tensor:
    """t as attn's module takes it: a float32 CPU tensor whose last dim is contiguous as it is
    (the module reads its memory in place), any other float tensor converted once to one."""
    if t.dtype is torch.float32 and t.is_cpu and t.dim() > 0 and (
            t.stride(-1) == 1 or t.shape[-1] == 1):
        return t  # the common case, in as few calls as possible
    _check_cpu(t, name)
    if not t.is_floating_point():
        raise TypeError(f"attn.torch: {name} must hold floating-point numbers, got {t.dtype}")
    if t.dtype is not torch.float32:
        t = t.float()
    if t.dim() > 0 and t.shape[-1] > 1 and t.stride(-1) != 1:
        t = t.contiguous()  # the kernels read rows (an expanded gradient has stride 0)
    return t


def _mask_array(mask: Optional[torch.Tensor]) -> Optional[np.ndarray]:
    """The mask as numpy: booleans stay booleans (they allow), floats are added."""
    if mask is None:
        return None
    _check_cpu(mask, "attn_mask")
    if mask.dtype is torch.bool:
        return mask.numpy()
    return _as_input(mask, "attn_mask").detach().numpy()


def _no_gradient(query: torch.Tensor) -> torch.Tensor:
    """The backward operators' output for a gradient not asked for: an empty tensor, a fresh one
    each time (an operator's outputs may not alias one another)."""
    return query.new_empty(0, dtype=torch.float32)


def _tensor(array, dtype: torch.dtype) -> torch.Tensor:
    """A result of the module as a tensor over the same memory, in dtype (a tensor it wrote
    into already, in dtype, as it is)."""
    out = array if isinstance(array, torch.Tensor) else torch.from_numpy(array)
    return out if out.dtype is dtype else out.to(dtype)


def _per_entry(values: Optional[torch.Tensor]):
    """One int64 per batch entry — the first key that is not left padding (key_starts), or the
    number of keys (key_lengths) — as the module takes it, a list."""
    return None if values is None else values.tolist()


def _per_head(values: Optional[torch.Tensor], name: str):
    """alibi_slopes or sinks (a tensor of one float per query head) as the module takes them."""
    if values is None:
        return None
    _check_cpu(values, name)
    if values.dim() != 1 or not values.is_floating_point():
        raise ValueError(f"attn.torch: {name} must be a 1-D float tensor (one value per query "
                         f"head), got {values.dtype} of shape {tuple(values.shape)}")
    return values.detach().float().tolist()


def _variants(softcap, alibi_slopes, sinks, dtype=torch.float32) -> dict:
    """The score variants, and the products' precision for tensors of dtype, as keyword
    arguments of the module's functions."""
    return {"softcap": float(softcap or 0.0), "alibi_slopes": _per_head(alibi_slopes, "alibi_slopes"),
            "sinks": _per_head(sinks, "sinks"),
            "precision": "bf16" if dtype is torch.bfloat16 else "f32"}


def _bfloat16_in_place(*tensors: torch.Tensor) -> bool:
    """Whether attn reads these as bfloat16, in place: bfloat16 CPU tensors (exactly
    torch.Tensor) of rank 2 to 4, no dim empty, the last one contiguous."""
    return all(type(t) is torch.Tensor and t.dtype is torch.bfloat16 and t.is_cpu
               and 2 <= t.dim() <= 4 and t.numel() > 0 and (t.stride(-1) == 1 or t.shape[-1] == 1)
               for t in tensors)


def _no_work(query, key, value) -> bool:
    """True when PyTorch's answer needs no kernel: the output has no element, or there are no
    keys (every row a softmax over nothing, which PyTorch's CPU kernel answers with zeros).
    Nothing of the kernels' checks is lost: attn refuses empty inputs, so these never reach it."""
    if query.dim() < 2 or key.dim() < 2 or value.dim() < 2:
        return False
    return math.prod(query.shape[:-1]) * value.shape[-1] == 0 or key.shape[-2] == 0


def _check_no_work_shapes(query, key, value) -> None:
    """The checks attn's kernels would have made, for the calls _no_work answers."""
    if key.shape[-2] != value.shape[-2] or query.shape[-1] != key.shape[-1]:
        raise ValueError(f"attn.torch: query {tuple(query.shape)}, key {tuple(key.shape)} and "
                         f"value {tuple(value.shape)} do not fit: key and value need as many "
                         "rows, query and key as many columns")


# Per live mask tensor and question (by id, with a weak reference that removes the entry when
# the mask goes): (the reference, the mask's _version then, the answer). Every layer of a forward
# gets the same mask object, so only the first pays for reading it. (A WeakKeyDictionary
# compares keys with ==, which a tensor answers elementwise.)
_answers_of_mask: dict = {}


def _once_per_mask(mask: torch.Tensor, question):
    """question(mask), computed once per mask object and version (every call for a tensor made
    under torch.inference_mode, which keeps no version to tell an in-place change by)."""
    if mask.is_inference():
        return question(mask)
    key = (id(mask), question.__name__)
    cached = _answers_of_mask.get(key)
    if cached is not None and cached[0]() is mask and cached[1] == mask._version:
        return cached[2]
    answer = question(mask)
    _answers_of_mask[key] = (weakref.ref(mask, lambda _: _answers_of_mask.pop(key, None)),
                             mask._version, answer)
    return answer


def _key_range(mask: torch.Tensor):
    """For a boolean (batch, 1, Tq, Tk) or (Tq, Tk) mask in which each batch entry's query i sees
    the keys from the entry's first real one up to key i (top-left causal: the mask of a padded
    prompt, the keys past Tq a static cache's slots not yet written) or, for one query row, one run
    of keys from the first real one (a cached step, the run ending where the cache's written
    keys do): (the first real key of each entry, one past the end of each entry's run for one row
    or None), int64 tensors (one entry for a 2-D mask). Otherwise None."""
    if mask.dim() == 2:
        mask = mask[None, None]
    q_length, kv_length = mask.shape[2], mask.shape[3]
    if q_length > 1 and bool(mask[:, 0, 0, 1:].any()):
        return None  # the first query sees a key past itself: not causal (a quick no for most)
    last_row = mask[:, 0, -1, :]  # the last query sees every real key it may
    real = last_row.any(dim=1)
    none = torch.full_like(real, kv_length, dtype=torch.long)
    starts = torch.where(real, last_row.int().argmax(dim=1), none)
    keys = torch.arange(kv_length)
    expected = keys[None, :] >= starts[:, None]  # (batch, Tk)
    if q_length > 1:
        expected = expected[:, None, None, :] & torch.ones(q_length, kv_length,
                                                           dtype=torch.bool).tril()
        return (starts, None) if torch.equal(mask, expected.expand_as(mask)) else None
    ends = torch.where(real, kv_length - last_row.flip(1).int().argmax(dim=1), none)
    expected = (expected & (keys[None, :] < ends[:, None]))[:, None, None, :]
    return (starts, ends) if torch.equal(mask, expected.expand_as(mask)) else None


def _key_starts(mask: torch.Tensor):
    """For a boolean (batch, 1, Tq, Tk) or (Tq, Tk) mask that is causal (Tq = Tk) or full (Tq = 1)
    apart from each entry's leading padding keys: the first real key of each entry, an int64
    tensor (one entry for a 2-D mask). Otherwise None."""
    found = _key_range(mask) if mask.shape[-2] in (1, mask.shape[-1]) else None
    if found is None or (found[1] is not None and not bool((found[1] == mask.shape[-1]).all())):
        return None
    return found[0]


def _boolean_mask_over(query, key, attn_mask) -> bool:
    """Whether attn_mask is a boolean mask with elements over (batch, heads, Tq, d) queries and
    (batch, kv_heads, Tk, d) keys, shaped (Tq, Tk) or (batch or 1, 1, Tq, Tk): the masks the
    operators' readers (_mask_as_starts, _mask_as_documents) look at."""
    return (attn_mask is not None and attn_mask.dtype is torch.bool and attn_mask.numel() > 0
            and query.dim() == 4 and key.dim() == 4
            and attn_mask.shape[-2:] == (query.shape[2], key.shape[2])
            and (attn_mask.dim() == 2
                 or (attn_mask.dim() == 4 and attn_mask.shape[1] == 1
                     and attn_mask.shape[0] in (1, query.shape[0]))))


def _mask_as_starts(query, key, attn_mask, is_causal, key_starts, lengths_taken=True):
    """(attn_mask, is_causal, key_starts, key_lengths) as the kernels take them. A boolean mask
    of _key_range's kinds — what transformers builds for a padded batch, a prompt into a static
    cache or a cached step, handed on as it is where attn.hf cannot read it (under
    torch.compile, or with a static cache's unwritten slots), or a tril mask given for
    is_causal — runs as is_causal (top-left) with each entry's first real key and, for a cached
    step, its number of keys: the blocks past the diagonal, in the padding and past the written
    keys are skipped instead of the mask read block by block (2.3x faster at T = 2048, H 16).
    Read here, inside the operators, when they run; once per mask object (_once_per_mask).
    lengths_taken=False (the bfloat16 entries, which take no key lengths): a mask that needs
    them stays a mask."""
    unchanged = attn_mask, is_causal, key_starts, None
    if is_causal or key_starts is not None or not _boolean_mask_over(query, key, attn_mask):
        return unchanged
    found = _once_per_mask(attn_mask, _key_range)
    if found is None:
        return unchanged
    starts, ends = found
    if ends is not None and bool((ends == key.shape[2]).all()):
        ends = None  # every written key: no lengths to pass
    if ends is not None and not lengths_taken:
        return unchanged
    batch = query.shape[0]
    causal = query.shape[2] > 1
    starts = None if not bool(starts.any()) else starts.expand(batch).contiguous()
    lengths = None if ends is None else ends.expand(batch).contiguous()
    return None, causal, starts, lengths


def _documents(mask: torch.Tensor):
    """For a boolean (batch, 1, T, T) mask in which every query row sees one run of keys that
    ends at itself and starts at its document's first token, or W − 1 keys back if that is
    later (documents packed end to end, each causal, with or without a sliding window of W):
    (the documents' offsets over the batch's batch·T rows as an int32 tensor, W or 0).
    Otherwise None."""
    seen = mask[:, 0]  # (batch, T, T)
    length = seen.shape[1]
    rows = torch.arange(length)
    first = seen.view(torch.uint8).argmax(dim=2)  # the first key each row sees (0 if none)
    # A document's first token sees itself alone; each row's document began at the last such row.
    begins = first == rows
    document_start = torch.cummax(torch.where(begins, rows, 0), dim=1).values
    windowed = first > document_start
    window = int((rows - first)[windowed].max()) + 1 if windowed.any() else 0
    expected_first = (document_start if window == 0 else
                      torch.maximum(document_start, rows - window + 1))
    if not torch.equal(first, expected_first):
        return None
    if not torch.equal(seen, (rows[None, None, :] >= first[:, :, None]).tril_()):
        return None
    starts = torch.nonzero(begins.reshape(-1)).reshape(-1)
    offsets = torch.cat([starts, torch.tensor([begins.numel()])]).to(torch.int32)
    return offsets, window


def _mask_as_documents(query, key, value, attn_mask):
    """_documents' answer for a boolean (batch, 1, T, T) mask over float tensors the varlen
    kernels take as rows — transformers' mask of packed documents, handed on as it is where
    attn.hf cannot read it (under torch.compile) — else None. Once per mask object."""
    if (not _boolean_mask_over(query, key, attn_mask) or attn_mask.dim() != 4
            or attn_mask.shape[0] != query.shape[0] or query.shape[2] < 2
            or query.shape[2] != key.shape[2] or _bfloat16_in_place(query, key, value)):
        return None
    return _once_per_mask(attn_mask, _documents)


def _as_rows(x: torch.Tensor) -> torch.Tensor:
    """(batch, heads, T, d) as the varlen kernels' rows (batch·T, heads, d), contiguous."""
    return _as_input(x.transpose(1, 2).reshape(-1, x.shape[1], x.shape[3]), "rows")


def _from_rows(rows, batch: int, dtype) -> torch.Tensor:
    """(batch·T, heads[, d]) rows back to (batch, heads, T[, d]), contiguous, in dtype."""
    t = _tensor(rows, dtype)
    t = t.reshape(batch, -1, *t.shape[1:])
    return t.transpose(1, 2).contiguous()


def _forward(query, key, value, attn_mask, is_causal, scale, with_lse=True, key_starts=None,
             softcap=0.0, alibi_slopes=None, sinks=None):
    """attn's fused forward: the output in query's dtype and, with_lse, the float32 logsumexp
    (else None)."""
    attn_mask, is_causal, key_starts, key_lengths = _mask_as_starts(
        query, key, attn_mask, is_causal, key_starts,
        lengths_taken=not _bfloat16_in_place(query, key, value))
    if _no_work(query, key, value):  # zeros, and the logsumexp of rows that see no key
        _check_no_work_shapes(query, key, value)
        out = query.new_zeros(query.shape[:-1] + value.shape[-1:])
        lse = torch.full(query.shape[:-1], math.inf) if with_lse else None
        return out, lse
    if _bfloat16_in_place(query, key, value):  # read as they are, the output written in bf16
        out = query.new_empty(query.shape[:-1] + value.shape[-1:])
        variants = _variants(softcap, alibi_slopes, sinks, torch.bfloat16)
        lse = _attn._torch_sdpa_bfloat16(
            query, key, value, out, is_causal, _mask_array(attn_mask), scale,
            _per_entry(key_starts), variants["softcap"], variants["alibi_slopes"],
            variants["sinks"])
        return out, torch.from_numpy(lse) if with_lse else None
    documents = _mask_as_documents(query, key, value, attn_mask)
    if documents is not None:  # packed documents: one varlen call over the rows
        offsets, window = documents
        out, lse = _attn.sdpa_varlen(_as_rows(query), _as_rows(key), _as_rows(value),
                                     offsets.tolist(), offsets.tolist(), causal=True,
                                     window=window or None, scale=scale,
                                     **_variants(softcap, alibi_slopes, sinks, query.dtype))
        batch = query.shape[0]
        return (_from_rows(out, batch, query.dtype),
                _from_rows(lse, batch, torch.float32) if with_lse else None)
    result = _attn.sdpa(_as_input(query, "query"), _as_input(key, "key"),
                        _as_input(value, "value"), causal=is_causal, causal_align="top-left",
                        mask=_mask_array(attn_mask), scale=scale, return_lse=with_lse,
                        key_starts=_per_entry(key_starts),
                        key_lengths=_per_entry(key_lengths),
                        **_variants(softcap, alibi_slopes, sinks, query.dtype))
    out, lse = result if with_lse else (result, None)
    return _tensor(out, query.dtype), None if lse is None else torch.from_numpy(lse)


def _weights(query, key, value, attn_mask, is_causal, scale, softcap=0.0, sinks=None):
    """The attention weights softmax(q·kᵀ·scale + mask) (…, Tq, Tk) from attn's kernel asked
    for them (scaled_dot_product_attention's semantics: top-left is_causal, GQA), in query's
    dtype, for callers that report the weights (attn.hf's output_attentions). Differentiable:
    a loss on them reaches query, key, a float mask and the sinks (_Weights)."""
    _check_devices(query, key, value, attn_mask)
    return _Weights.apply(query, key, value, attn_mask, sinks, is_causal, scale, float(softcap))


def _grouped(key: torch.Tensor, query: torch.Tensor) -> torch.Tensor:
    """key's heads (dim -3) repeated for the query heads each one serves (GQA); key itself when
    they are as many, or for inputs without a head dim."""
    if key.dim() < 3 or query.dim() < 3 or key.shape[-3] == query.shape[-3]:
        return key
    return key.repeat_interleave(query.shape[-3] // key.shape[-3], dim=-3)


class _Weights(torch.autograd.Function):
    """The weights P from attn's kernel, and the softmax's backward for them. With dP the
    gradient of P, a row's scores get dS = P ⊙ (dP − Σ_j P_j·dP_j) — the sink's logit, which is
    in every denominator but has no weight of its own here, changes nothing in that — and the
    sink, whose probability is 1 − Σ_j P_j, gets −(1 − Σ_j P_j)·Σ_j P_j·dP_j summed over its
    rows. Soft-capping multiplies dS by 1 − tanh²(s/c) of the scaled score s, the scale by
    `scale`; then dq = dS·k, dk = dSᵀ·q, summed over the query heads a K head serves, and a float
    mask gets dS summed over its broadcast dims. In float32 with PyTorch's products: the weights
    are a Tq × Tk tensor already, and this runs only when a loss asks for them."""

    @staticmethod
    def forward(ctx, query, key, value, attn_mask, sinks, is_causal, scale, softcap):
        query, key, value = (t.detach() for t in (query, key, value))
        attn_mask = None if attn_mask is None else attn_mask.detach()
        _, weights = _attn.sdpa(_as_input(query, "query"), _as_input(key, "key"),
                                _as_input(value, "value"), causal=is_causal,
                                causal_align="top-left", mask=_mask_array(attn_mask), scale=scale,
                                return_weights=True,
                                **_variants(softcap, None, sinks, torch.float32))
        weights = torch.from_numpy(weights)
        ctx.save_for_backward(query, key, attn_mask, sinks, weights)
        ctx.scale = scale if scale is not None else query.shape[-1] ** -0.5
        ctx.softcap = softcap
        return weights if query.dtype is torch.float32 else weights.to(query.dtype)

    @staticmethod
    def backward(ctx, grad):
        query, key, attn_mask, sinks, weights = ctx.saved_tensors
        needs_q, needs_k, _, needs_mask, needs_sinks = ctx.needs_input_grad[:5]
        grad = grad.float()
        along_row = (weights * grad).sum(-1, keepdim=True)
        d_scores = weights * (grad - along_row)
        d_mask = d_sinks = d_query = d_key = None
        if needs_mask and attn_mask is not None and attn_mask.is_floating_point():
            d_mask = d_scores.sum_to_size(attn_mask.shape).to(attn_mask.dtype)
        if needs_sinks and sinks is not None:  # every dim but the heads' (-3) summed
            per_row = -(1.0 - weights.sum(-1)) * along_row.squeeze(-1)  # (..., H, Tq)
            d_sinks = per_row.transpose(-2, -1).reshape(-1, sinks.shape[0]).sum(0)
            d_sinks = d_sinks.to(sinks.dtype)
        if needs_q or needs_k:
            q, k = query.float(), _grouped(key.float(), query)
            d_raw = d_scores
            if ctx.softcap:
                capped = torch.tanh((q @ k.transpose(-2, -1)) * (ctx.scale / ctx.softcap))
                d_raw = d_raw * (1.0 - capped * capped)
            d_raw = d_raw * ctx.scale
            if needs_q:
                d_query = (d_raw @ k).to(query.dtype)
            if needs_k:
                d_key = d_raw.transpose(-2, -1) @ q
                if d_key.shape != key.shape:  # the query heads of each K head summed (GQA)
                    d_key = d_key.unflatten(-3, (key.shape[-3], -1)).sum(-3)
                d_key = d_key.to(key.dtype)
        return d_query, d_key, None, d_mask, d_sinks, None, None, None


@torch.library.custom_op("attn::sdpa", mutates_args=())
def _sdpa(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
          attn_mask: Optional[torch.Tensor], is_causal: bool, scale: Optional[float],
          key_starts: Optional[torch.Tensor] = None, softcap: float = 0.0,
          alibi_slopes: Optional[torch.Tensor] = None,
          sinks: Optional[torch.Tensor] = None) -> Tuple[torch.Tensor, torch.Tensor]:
    return _forward(query, key, value, attn_mask, is_causal, scale, key_starts=key_starts,
                    softcap=softcap, alibi_slopes=alibi_slopes, sinks=sinks)


@_sdpa.register_fake
def _(query, key, value, attn_mask, is_causal, scale, key_starts=None, softcap=0.0,
      alibi_slopes=None, sinks=None):
    out_shape = query.shape[:-1] + value.shape[-1:]
    return query.new_empty(out_shape), query.new_empty(query.shape[:-1], dtype=torch.float32)


@torch.library.custom_op("attn::sdpa_backward", mutates_args=())
def _sdpa_backward(grad_out: torch.Tensor, query: torch.Tensor, key: torch.Tensor,
                   value: torch.Tensor, out: torch.Tensor, lse: torch.Tensor,
                   attn_mask: Optional[torch.Tensor], is_causal: bool, scale: Optional[float],
                   key_starts: Optional[torch.Tensor] = None, softcap: float = 0.0,
                   alibi_slopes: Optional[torch.Tensor] = None,
                   sinks: Optional[torch.Tensor] = None, mask_gradient: bool = False
                   ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor,
                              torch.Tensor]:
    """dq, dk, dv, the sinks' gradient and, with mask_gradient, the float mask's (empty tensors
    where not asked for)."""
    if _no_work(query, key, value):  # the output did not depend on any input
        dsinks = torch.zeros_like(sinks) if sinks is not None else _no_gradient(query)
        dmask = torch.zeros_like(attn_mask) if mask_gradient else _no_gradient(query)
        return (torch.zeros_like(query), torch.zeros_like(key), torch.zeros_like(value), dsinks,
                dmask)
    in_place = _bfloat16_in_place(grad_out, query, key, value, out)
    key_lengths = None
    if not mask_gradient:  # a boolean mask read as the forward read it
        attn_mask, is_causal, key_starts, key_lengths = _mask_as_starts(
            query, key, attn_mask, is_causal, key_starts, lengths_taken=not in_place)
    variants = _variants(softcap, alibi_slopes, sinks, query.dtype)
    documents = None if mask_gradient else _mask_as_documents(query, key, value, attn_mask)
    if documents is not None:  # packed documents, as the forward ran them
        offsets, window = documents
        grads = list(_attn.sdpa_varlen_backward(
            _as_rows(query), _as_rows(key), _as_rows(value), _as_rows(out),
            _as_input(lse.transpose(1, 2).reshape(-1, lse.shape[1]), "lse"), _as_rows(grad_out),
            offsets.tolist(), offsets.tolist(), causal=True, window=window or None, scale=scale,
            **variants))
        batch = query.shape[0]
        dsinks = _tensor(grads.pop(), sinks.dtype) if sinks is not None else _no_gradient(query)
        return (_from_rows(grads[0], batch, query.dtype), _from_rows(grads[1], batch, key.dtype),
                _from_rows(grads[2], batch, value.dtype), dsinks, _no_gradient(query))
    if in_place:  # bfloat16 tensors read as they are, the gradients written in bfloat16
        dq, dk, dv = (torch.empty(t.shape, dtype=torch.bfloat16) for t in (query, key, value))
        grads = [dq, dk, dv] + list(_attn._torch_sdpa_backward_bfloat16(
            grad_out, query, key, value, out, _as_input(lse, "lse"), is_causal,
            _mask_array(attn_mask), scale, _per_entry(key_starts), variants["softcap"],
            variants["alibi_slopes"], variants["sinks"], mask_gradient, dq, dk, dv))
    else:
        grads = list(_attn.sdpa_backward(
            _as_input(query, "query"), _as_input(key, "key"), _as_input(value, "value"),
            _as_input(out, "out"), _as_input(lse, "lse"), _as_input(grad_out, "grad"),
            causal=is_causal, causal_align="top-left", mask=_mask_array(attn_mask), scale=scale,
            key_starts=_per_entry(key_starts), key_lengths=_per_entry(key_lengths),
            return_mask_gradient=mask_gradient,
            **variants))
    dmask = _tensor(grads.pop(), attn_mask.dtype) if mask_gradient else _no_gradient(query)
    dsinks = _tensor(grads.pop(), sinks.dtype) if sinks is not None else _no_gradient(query)
    return (_tensor(grads[0], query.dtype), _tensor(grads[1], key.dtype),
            _tensor(grads[2], value.dtype), dsinks, dmask)


@_sdpa_backward.register_fake
def _(grad_out, query, key, value, out, lse, attn_mask, is_causal, scale, key_starts=None,
      softcap=0.0, alibi_slopes=None, sinks=None, mask_gradient=False):
    dsinks = torch.empty_like(sinks) if sinks is not None else _no_gradient(query)
    dmask = torch.empty_like(attn_mask) if mask_gradient else _no_gradient(query)
    return (torch.empty_like(query), torch.empty_like(key), torch.empty_like(value), dsinks,
            dmask)


def _setup_context(ctx, inputs, output):
    query, key, value, attn_mask, is_causal, scale, key_starts, softcap, alibi_slopes, sinks = inputs
    out, lse = output
    ctx.mark_non_differentiable(lse)  # a statistic of the forward, as argmax's index
    ctx.save_for_backward(query, key, value, out, lse, attn_mask, key_starts, alibi_slopes, sinks)
    ctx.is_causal, ctx.scale, ctx.softcap = is_causal, scale, softcap


def _backward(ctx, grad_out, grad_lse):
    query, key, value, out, lse, attn_mask, key_starts, alibi_slopes, sinks = ctx.saved_tensors
    if alibi_slopes is not None and ctx.needs_input_grad[8]:
        raise NotImplementedError(
            "attn.torch: ALiBi's slopes are fixed: pass alibi_slopes.detach()")
    mask_gradient = attn_mask is not None and ctx.needs_input_grad[3]  # a learned bias
    dq, dk, dv, dsinks, dmask = _sdpa_backward(grad_out, query, key, value, out, lse, attn_mask,
                                               ctx.is_causal, ctx.scale, key_starts, ctx.softcap,
                                               alibi_slopes, sinks, mask_gradient)
    return (dq, dk, dv, dmask if mask_gradient else None, None, None, None, None, None,
            dsinks if sinks is not None else None)


_sdpa.register_autograd(_backward, setup_context=_setup_context)

# True under torch.func's vmap, grad and the like, whose wrapped tensors have no memory of their
# own to read in place: the calls then go through the operators and their vmap rules.
_transforms_active = torch._C._are_functorch_transforms_active


def _vmap_by_slices(op):
    """A vmap rule for op: one call per index of the mapped dim, the results stacked. Each call
    still spreads its own batch, heads and query blocks over the threads; merging the mapped
    dim into the batch would save calls, but needs every argument's mapping (K/V shared or
    not, a mask's dims, per-head sinks) worked out, for a use that is rare."""
    def rule(info, in_dims, *args):
        if info.batch_size == 0:
            raise ValueError("attn.torch: vmap over a dim of size 0")
        results = []
        for i in range(info.batch_size):
            sliced = [a if d is None else a.select(d, i) for a, d in zip(args, in_dims)]
            results.append(op(*sliced))
        stacked = tuple(torch.stack(outs) for outs in zip(*results))
        return stacked, (0,) * len(stacked)
    op.register_vmap(rule)


def scaled_dot_product_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                                 attn_mask: Optional[torch.Tensor] = None,
                                 dropout_p: float = 0.0, is_causal: bool = False,
                                 scale: Optional[float] = None,
                                 enable_gqa: bool = False) -> torch.Tensor:
    """PyTorch 2's `F.scaled_dot_product_attention` on attn's fused CPU kernels (see the module
    docstring): the same arguments, the same result, and a backward."""
    query, key, value, attn_mask = _autocast(query, key, value, attn_mask)
    if attn_mask is None and dropout_p == 0.0 and _plain_inference(query, key, value, None):
        out = _attn._torch_plain_sdpa(query, key, value, is_causal, scale, enable_gqa)
        if out is not None:  # float32 CPU tensors read in place, the kernel called directly
            return torch.from_numpy(out)
    if dropout_p != 0.0:
        raise ValueError(f"attn.torch: dropout_p must be 0.0 (attn has no attention dropout), "
                         f"got {dropout_p}")
    _check_call(query, key, value, attn_mask, is_causal, enable_gqa)
    return _attend_any_shape(query, key, value, attn_mask, is_causal, scale, enable_gqa)


def _autocast(query, key, value, attn_mask):
    """What PyTorch's SDPA does inside torch.autocast on the CPU: query, key, value and a float
    mask, float32 or float16, cast to the autocast dtype (bfloat16 unless another is set;
    float64 stays), so that attn runs its bf16 products and returns the autocast dtype. Outside
    autocast (one check, ~0.2 µs) they come back as they are."""
    if not torch.is_autocast_enabled("cpu"):
        return query, key, value, attn_mask
    dtype = torch.get_autocast_dtype("cpu")

    def cast(t):
        if (t is None or not t.is_floating_point() or t.dtype is torch.float64
                or t.dtype is dtype or not t.is_cpu):
            return t
        return t.to(dtype)
    return cast(query), cast(key), cast(value), cast(attn_mask)


def _check_dtypes(query, key, value, attn_mask) -> None:
    """PyTorch's rules for the dtypes: query, key and value alike (float ones: other dtypes get
    _as_input's TypeError), a float mask float32 or query's dtype. attn would compute mixed
    dtypes in float32 and answer in query's; PyTorch refuses them, so attn does too."""
    if not (query.is_floating_point() and key.is_floating_point()
            and value.is_floating_point()):
        return
    if not query.dtype == key.dtype == value.dtype:
        raise ValueError(f"attn.torch: query, key and value must have the same dtype (as in "
                         f"PyTorch), got {query.dtype}, {key.dtype} and {value.dtype}")
    if (attn_mask is not None and attn_mask.is_floating_point()
            and attn_mask.dtype not in (torch.float32, query.dtype)):
        raise ValueError(f"attn.torch: a float attn_mask must be float32 or query's dtype "
                         f"({query.dtype}), as in PyTorch; got {attn_mask.dtype}")


def _check_call(query, key, value, attn_mask, is_causal, enable_gqa) -> None:
    """PyTorch's rules for the arguments: CPU tensors of one dtype, a mask or is_causal, grouped
    heads only with enable_gqa."""
    _check_devices(query, key, value, attn_mask)
    _check_dtypes(query, key, value, attn_mask)
    if is_causal and attn_mask is not None:
        raise ValueError("attn.torch: attn_mask and is_causal cannot both be set (as in PyTorch)")
    if (not enable_gqa and query.dim() >= 3 and key.dim() >= 3
            and key.shape[-3] != query.shape[-3] and 1 not in (key.shape[-3], query.shape[-3])):
        raise ValueError(f"attn.torch: query has {query.shape[-3]} heads and key "
                         f"{key.shape[-3]}: pass enable_gqa=True for grouped heads")


def _attend_any_shape(query, key, value, attn_mask, is_causal, scale, enable_gqa, softcap=0.0,
                      alibi_slopes=None, sinks=None) -> torch.Tensor:
    """_attend on PyTorch's shapes: (..., L, E) with leading dims broadcast between query, key
    and value (a head dim of 1 too, unless enable_gqa groups the heads), and more than one batch
    dim merged into one, the kernels' (B, H, L, E). Broadcast dims are stride-0 views, read in
    place; autograd sums their gradients back."""
    ranks = (query.dim(), key.dim(), value.dim())
    if (ranks[0] <= 4 and ranks[0] == ranks[1] == ranks[2]
            and query.shape[:-3] == key.shape[:-3] == value.shape[:-3]
            and (ranks[0] < 3 or key.shape[-3] == value.shape[-3])):
        return _attend(query, key, value, attn_mask, is_causal, scale, None, softcap, alibi_slopes,
                       sinks)  # the kernels' own shapes
    if min(ranks) < 2:
        raise ValueError(f"attn.torch: query, key and value need at least 2 dims (L, E), got "
                         f"{tuple(query.shape)}, {tuple(key.shape)}, {tuple(value.shape)}")
    rank = max(max(ranks), 3)
    q, k, v = (t.reshape((1,) * (rank - t.dim()) + tuple(t.shape)) for t in (query, key, value))
    try:
        batch = torch.broadcast_shapes(q.shape[:-3], k.shape[:-3], v.shape[:-3])
        if enable_gqa:  # the head dims stay as they are; the kernels group them
            kv_heads = torch.broadcast_shapes(k.shape[-3:-2], v.shape[-3:-2])
            q_lead, kv_lead = batch + q.shape[-3:-2], batch + kv_heads
        else:
            q_lead = kv_lead = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    except RuntimeError as e:
        raise ValueError(f"attn.torch: query {tuple(query.shape)}, key {tuple(key.shape)} and "
                         f"value {tuple(value.shape)} do not broadcast: {e}") from None
    q = q.expand(q_lead + q.shape[-2:])
    k, v = k.expand(kv_lead + k.shape[-2:]), v.expand(kv_lead + v.shape[-2:])
    mask = attn_mask
    if rank > 4:  # the batch dims merged into one
        n = math.prod(batch)
        q, k, v = (t.reshape((n,) + t.shape[-3:]) for t in (q, k, v))
        if mask is not None and mask.dim() > 3:
            mask_tail = mask.shape[-3:]
            mask = mask.expand(batch + mask_tail).reshape((n,) + mask_tail)
    out = _attend(q, k, v, mask, is_causal, scale, None, softcap, alibi_slopes, sinks)
    return out.reshape(q_lead + out.shape[-2:])


def _attend(query, key, value, attn_mask, is_causal, scale, key_starts=None, softcap=0.0,
            alibi_slopes=None, sinks=None) -> torch.Tensor:
    """The call after the argument checks: the kernel directly when nothing needs the operator,
    else the operator (autograd, torch.compile). key_starts (attn.hf's left padding): an int64
    tensor of the first real key of each batch entry, or None."""
    if _plain_inference(query, key, value, attn_mask) and not (
            sinks is not None and (sinks.requires_grad or type(sinks) is not torch.Tensor)):
        return _forward(query, key, value, attn_mask, is_causal, scale, with_lse=False,
                        key_starts=key_starts, softcap=softcap, alibi_slopes=alibi_slopes,
                        sinks=sinks)[0]
    out, _ = _sdpa(query, key, value, attn_mask, is_causal, scale, key_starts, float(softcap),
                   alibi_slopes, sinks)
    return out


def attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
              attn_mask: Optional[torch.Tensor] = None, is_causal: bool = False,
              scale: Optional[float] = None, enable_gqa: bool = False, *,
              softcap: float = 0.0, alibi_slopes: Optional[torch.Tensor] = None,
              sinks: Optional[torch.Tensor] = None) -> torch.Tensor:
    """`scaled_dot_product_attention` (the same arguments and meaning, no dropout) with the score
    variants of today's models, forward and backward:

    - softcap: c > 0 caps each scaled score to c·tanh(s / c) before the mask (Gemma 2);
    - alibi_slopes: a float tensor (H,), one slope per query head; the score of query i and key
      j gains -slope·|i - j| (top-left positions, as is_causal) (BLOOM, MPT); no gradient;
    - sinks: a float tensor (H,), one logit per query head in every softmax denominator
      (gpt-oss); differentiable: its gradient comes from attn's fused backward.

    Inside torch.autocast on the CPU, query, key, value and a float mask are cast to the autocast
    dtype as scaled_dot_product_attention's are; sinks and slopes stay as they are.
    """
    query, key, value, attn_mask = _autocast(query, key, value, attn_mask)
    _check_call(query, key, value, attn_mask, is_causal, enable_gqa)
    return _attend_any_shape(query, key, value, attn_mask, is_causal, scale, enable_gqa, softcap,
                             alibi_slopes, sinks)


def _check_devices(query, key, value, attn_mask) -> None:
    """CPU tensors only. Checked before the operator too: for a meta tensor it runs its fake,
    never the kernel."""
    if not (query.is_cpu and key.is_cpu and value.is_cpu
            and (attn_mask is None or attn_mask.is_cpu)):
        for name, t in (("query", query), ("key", key), ("value", value),
                        ("attn_mask", attn_mask)):
            if t is not None:
                _check_cpu(t, name)


def _plain_inference(query, key, value, attn_mask) -> bool:
    """True when nothing needs the operator: no gradient to record, no graph being traced, no
    torch.func transform (vmap, grad) active, only plain tensors. The kernel is then called
    directly: the operator's dispatch cost ~60 µs a call (70 µs against 9 µs for the same
    16 × 16 attention through attn.sdpa). Written out rather than over a tuple: this runs on
    every call."""
    plain = torch.Tensor
    if (type(query) is not plain or type(key) is not plain or type(value) is not plain
            or (attn_mask is not None and type(attn_mask) is not plain)
            or torch.compiler.is_compiling() or _transforms_active()):
        return False
    return not torch.is_grad_enabled() or not (
        query.requires_grad or key.requires_grad or value.requires_grad
        or (attn_mask is not None and attn_mask.requires_grad))


# ---------------------------------------------------------------------------------------------
# Packed variable-length batches: PyTorch's torch.nn.attention.varlen.varlen_attn on the CPU.

def _offsets(cu: torch.Tensor, name: str):
    _check_cpu(cu, name)
    if cu.dim() != 1 or cu.is_floating_point():
        raise ValueError(f"attn.torch: {name} must be a 1-D integer tensor of offsets, got "
                         f"{cu.dtype} of shape {tuple(cu.shape)}")
    return cu.tolist()


def _check_no_queries(cu_seq_q: torch.Tensor, cu_seq_k: torch.Tensor, keys: int) -> None:
    """For a call with no query tokens, the checks the kernels would have made: every query
    offset 0, and the key offsets as many, from 0 to the key rows, never decreasing."""
    q_offsets, k_offsets = _offsets(cu_seq_q, "cu_seq_q"), _offsets(cu_seq_k, "cu_seq_k")
    if any(q_offsets):
        raise ValueError(f"attn.torch: cu_seq_q must be all 0 for no query rows, got {q_offsets}")
    if (len(k_offsets) != len(q_offsets) or not k_offsets or k_offsets[0] != 0
            or k_offsets[-1] != keys or any(a > b for a, b in zip(k_offsets, k_offsets[1:]))):
        raise ValueError(f"attn.torch: cu_seq_k {k_offsets} must hold {len(q_offsets)} offsets "
                         f"from 0 to the {keys} key rows, never decreasing")


def _keys_used(seqused_k: Optional[torch.Tensor], sequences: int):
    """seqused_k as a list of counts (None: every key of each slot)."""
    if seqused_k is None:
        return None
    _check_cpu(seqused_k, "seqused_k")
    if seqused_k.dim() != 1 or seqused_k.is_floating_point() or seqused_k.shape[0] != sequences:
        raise ValueError(f"attn.torch: seqused_k must be a 1-D integer tensor of {sequences} "
                         f"counts, one per sequence, got {seqused_k.dtype} of shape "
                         f"{tuple(seqused_k.shape)}")
    return seqused_k.tolist()


class _Pages:
    """A paged K/V cache read as packed rows, for the backward and for bfloat16 tensors (the
    float forward hands the pages to attn.sdpa_varlen_paged as they are): sequence s's keys are
    the first seqused_k[s] tokens of the pages block_table[s, 0], block_table[s, 1], … of key and
    value (total_pages, page_size, Hkv, D). The rows are gathered into packed tensors (one copy of
    the tokens in use), and the keys' gradient is added back into the pages they came from
    (pages shared by sequences sum theirs)."""

    @staticmethod
    def check(key: torch.Tensor, block_table: torch.Tensor, used, sequences: int) -> None:
        """The arguments' kinds and shapes (the pages each sequence names are checked where
        they are read)."""
        _check_cpu(block_table, "block_table")
        if used is None:
            raise ValueError("attn.torch: block_table needs seqused_k, the tokens each sequence "
                             "holds in its pages")
        if key.dim() != 4:
            raise ValueError("attn.torch: with block_table, key and value are pages "
                             f"(total_pages, page_size, Hkv, D), got key of shape "
                             f"{tuple(key.shape)}")
        if (block_table.dim() != 2 or block_table.is_floating_point()
                or block_table.shape[0] != sequences):
            raise ValueError(f"attn.torch: block_table must be a 2-D integer tensor "
                             f"({sequences} sequences, pages per sequence), got "
                             f"{block_table.dtype} of shape {tuple(block_table.shape)}")

    def __init__(self, key: torch.Tensor, block_table: torch.Tensor, used, sequences: int):
        self.check(key, block_table, used, sequences)
        pages, page_size = key.shape[0], key.shape[1]
        rows = []
        for s, n in enumerate(used):
            needed = -(-n // page_size) if page_size else 0
            if n < 0 or needed > block_table.shape[1] or (n > 0 and page_size == 0):
                raise ValueError(f"attn.torch: seqused_k[{s}] = {n} does not fit in the "
                                 f"{block_table.shape[1]} pages of {page_size} tokens")
            table = block_table[s, :needed].to(torch.int64)
            if needed and (int(table.min()) < 0 or int(table.max()) >= pages):
                raise ValueError(f"attn.torch: block_table[{s}] names a page outside the "
                                 f"{pages} pages of key and value")
            tokens = table[:, None] * page_size + torch.arange(page_size)
            rows.append(tokens.reshape(-1)[:n])
        self.index = torch.cat(rows) if rows else torch.zeros(0, dtype=torch.int64)
        self.cu = [0]
        for n in used:
            self.cu.append(self.cu[-1] + n)
        self.cu = torch.tensor(self.cu, dtype=torch.int64)

    def rows(self, pages: torch.Tensor) -> torch.Tensor:
        """The tokens in use of (total_pages, page_size, H, D), packed (tokens, H, D)."""
        return pages.reshape(-1, *pages.shape[2:]).index_select(0, self.index)

    def into_pages(self, rows: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
        """Packed rows' gradient added back into the pages' shape (zeros where none was read)."""
        flat = torch.zeros(like.shape[0] * like.shape[1], *like.shape[2:], dtype=rows.dtype)
        return flat.index_add_(0, self.index, rows).reshape(like.shape).to(like.dtype)


def _as_read(key, value, cu_seq_k, seqused_k, block_table, sequences):
    """The packed K and V rows, the key offsets and the keys in use per sequence that the
    kernels take, from what varlen_attention was given; and the pages, if any."""
    used = _keys_used(seqused_k, sequences)
    if block_table is None:
        return key, value, cu_seq_k, used, None
    pages = _Pages(key, block_table, used, sequences)
    return pages.rows(key), pages.rows(value), pages.cu, None, pages


@torch.library.custom_op("attn::varlen", mutates_args=())
def _varlen(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, cu_seq_q: torch.Tensor,
            cu_seq_k: Optional[torch.Tensor], is_causal: bool, window: int,
            scale: Optional[float], softcap: float = 0.0,
            alibi_slopes: Optional[torch.Tensor] = None, sinks: Optional[torch.Tensor] = None,
            seqused_k: Optional[torch.Tensor] = None,
            block_table: Optional[torch.Tensor] = None) -> Tuple[torch.Tensor, torch.Tensor]:
    if block_table is not None and query.shape[0] > 0 and query.dtype is torch.float32:
        # The pages read where they lie (decode steps) or gathered by attn per sequence.
        sequences = cu_seq_q.shape[0] - 1
        used = _keys_used(seqused_k, sequences)
        _Pages.check(key, block_table, used, sequences)
        out, lse = _attn.sdpa_varlen_paged(
            _as_input(query, "query"), _as_input(key, "key"), _as_input(value, "value"),
            _offsets(cu_seq_q, "cu_seq_q"), block_table.tolist(), used, causal=is_causal,
            window=window or None, scale=scale,
            **_variants(softcap, alibi_slopes, sinks, query.dtype))
        return _tensor(out, query.dtype), torch.from_numpy(lse)
    key, value, cu_seq_k, used, _ = _as_read(key, value, cu_seq_k, seqused_k, block_table,
                                             cu_seq_q.shape[0] - 1)
    if query.shape[0] == 0:  # no query tokens: an empty result, as the dense call gives
        _check_no_queries(cu_seq_q, cu_seq_k, key.shape[0])
        return (query.new_empty(query.shape[:-1] + value.shape[-1:]),
                query.new_empty(query.shape[:-1], dtype=torch.float32))
    out, lse = _attn.sdpa_varlen(_as_input(query, "query"), _as_input(key, "key"),
                                 _as_input(value, "value"), _offsets(cu_seq_q, "cu_seq_q"),
                                 _offsets(cu_seq_k, "cu_seq_k"), causal=is_causal,
                                 window=window or None, scale=scale, key_lengths=used,
                                 **_variants(softcap, alibi_slopes, sinks, query.dtype))
    return _tensor(out, query.dtype), torch.from_numpy(lse)


@_varlen.register_fake
def _(query, key, value, cu_seq_q, cu_seq_k, is_causal, window, scale, softcap=0.0,
      alibi_slopes=None, sinks=None, seqused_k=None, block_table=None):
    return (query.new_empty(query.shape[:-1] + value.shape[-1:]),
            query.new_empty(query.shape[:-1], dtype=torch.float32))


@torch.library.custom_op("attn::varlen_backward", mutates_args=())
def _varlen_backward(grad_out: torch.Tensor, query: torch.Tensor, key: torch.Tensor,
                     value: torch.Tensor, out: torch.Tensor, lse: torch.Tensor,
                     cu_seq_q: torch.Tensor, cu_seq_k: Optional[torch.Tensor], is_causal: bool,
                     window: int, scale: Optional[float], softcap: float = 0.0,
                     alibi_slopes: Optional[torch.Tensor] = None,
                     sinks: Optional[torch.Tensor] = None,
                     seqused_k: Optional[torch.Tensor] = None,
                     block_table: Optional[torch.Tensor] = None
                     ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    if query.shape[0] == 0:  # no tokens: nothing depended on the keys, values or sinks
        dsinks = torch.zeros_like(sinks) if sinks is not None else _no_gradient(query)
        return torch.zeros_like(query), torch.zeros_like(key), torch.zeros_like(value), dsinks
    key_rows, value_rows, cu_seq_k, used, pages = _as_read(key, value, cu_seq_k, seqused_k,
                                                           block_table, cu_seq_q.shape[0] - 1)
    grads = _attn.sdpa_varlen_backward(
        _as_input(query, "query"), _as_input(key_rows, "key"), _as_input(value_rows, "value"),
        _as_input(out, "out"), _as_input(lse, "lse"), _as_input(grad_out, "grad"),
        _offsets(cu_seq_q, "cu_seq_q"), _offsets(cu_seq_k, "cu_seq_k"), causal=is_causal,
        window=window or None, scale=scale, key_lengths=used,
        **_variants(softcap, alibi_slopes, sinks, query.dtype))
    dsinks = _tensor(grads[3], sinks.dtype) if sinks is not None else _no_gradient(query)
    dk, dv = _tensor(grads[1], key.dtype), _tensor(grads[2], value.dtype)
    if pages is not None:
        dk, dv = pages.into_pages(dk, key), pages.into_pages(dv, value)
    return _tensor(grads[0], query.dtype), dk, dv, dsinks


@_varlen_backward.register_fake
def _(grad_out, query, key, value, out, lse, cu_seq_q, cu_seq_k, is_causal, window, scale,
      softcap=0.0, alibi_slopes=None, sinks=None, seqused_k=None, block_table=None):
    dsinks = torch.empty_like(sinks) if sinks is not None else _no_gradient(query)
    return torch.empty_like(query), torch.empty_like(key), torch.empty_like(value), dsinks


def _varlen_setup_context(ctx, inputs, output):
    (query, key, value, cu_seq_q, cu_seq_k, is_causal, window, scale, softcap, alibi_slopes,
     sinks, seqused_k, block_table) = inputs
    out, lse = output
    ctx.mark_non_differentiable(lse)
    ctx.save_for_backward(query, key, value, out, lse, cu_seq_q, cu_seq_k, alibi_slopes, sinks,
                          seqused_k, block_table)
    ctx.is_causal, ctx.window, ctx.scale, ctx.softcap = is_causal, window, scale, softcap


def _varlen_backward_rule(ctx, grad_out, grad_lse):
    (query, key, value, out, lse, cu_seq_q, cu_seq_k, alibi_slopes, sinks, seqused_k,
     block_table) = ctx.saved_tensors
    dq, dk, dv, dsinks = _varlen_backward(grad_out, query, key, value, out, lse, cu_seq_q,
                                          cu_seq_k, ctx.is_causal, ctx.window, ctx.scale,
                                          ctx.softcap, alibi_slopes, sinks, seqused_k,
                                          block_table)
    return (dq, dk, dv, None, None, None, None, None, None, None,
            dsinks if sinks is not None else None, None, None)


_varlen.register_autograd(_varlen_backward_rule, setup_context=_varlen_setup_context)

for _op in (_sdpa, _varlen):  # (the backwards are reached only by autograd, which vmap lacks)
    _vmap_by_slices(_op)


def _no_second_derivative(ctx, *grads):
    raise NotImplementedError(
        "attn.torch: attn's backward has no derivative of its own, so a gradient of a gradient "
        "(torch.autograd.grad(..., create_graph=True) through attention, a gradient penalty) "
        "cannot pass through it; PyTorch's fused CPU kernel has none either. Compute that "
        "attention with explicit operations (softmax(q·kᵀ)·v) instead")


for _op in (_sdpa_backward, _varlen_backward):  # said plainly rather than by the dispatcher
    _op.register_autograd(_no_second_derivative, setup_context=lambda ctx, inputs, output: None)


def varlen_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                     cu_seq_q: torch.Tensor, cu_seq_k: Optional[torch.Tensor], max_q: int,
                     max_k: int, *, return_aux=None, scale: Optional[float] = None,
                     window_size: Tuple[int, int] = (-1, -1), enable_gqa: bool = False,
                     seqused_k: Optional[torch.Tensor] = None,
                     block_table: Optional[torch.Tensor] = None,
                     num_splits: Optional[int] = None, softcap: float = 0.0,
                     alibi_slopes: Optional[torch.Tensor] = None,
                     sinks: Optional[torch.Tensor] = None):
    """PyTorch's `torch.nn.attention.varlen.varlen_attn` on attn's fused CPU kernels, forward and
    backward: query (Tq, Hq, D), key and value (Tk, Hkv, D), sequences packed end to end with
    cumulative offsets cu_seq_q and cu_seq_k (N + 1 each). window_size (left, right) as there:
    (-1, -1) every key of the sequence, (-1, 0) causal, (W, 0) causal over the last W + 1 keys
    (bottom-right aligned within each sequence, as FlashAttention's). max_q and max_k are
    taken for the signature's sake (attn reads the offsets). With return_aux.lse, also the
    logsumexp (Tq, Hq).

    seqused_k (N,): sequence s attends to the first seqused_k[s] keys of its slot only (a cache
    slot longer than what it holds). block_table (N, pages per sequence), with seqused_k: key and
    value are a paged cache (total_pages, page_size, Hkv, D) and sequence s's keys are its pages
    block_table[s, 0], block_table[s, 1], … in that order; cu_seq_k is then not read (None is
    taken). Decode steps (fewer than 16 queries at the end of their keys) read the pages where
    they lie; longer sequences, bfloat16 tensors and the backward gather the tokens in use into
    packed rows first (a copy). Unlike PyTorch's, both work in the backward too: keys past
    seqused_k get zero gradients, and a page's gradient sums those of every sequence that read
    it. num_splits is taken for the signature's sake: attn
    never splits a sequence's keys across threads in a way that depends on the batch, so each
    sequence's result is bitwise the same whatever else is packed with it.
    softcap, alibi_slopes and sinks as in `attention` (attn's additions)."""
    left, right = window_size
    if right not in (-1, 0) or (right == -1 and left != -1):
        raise ValueError(f"attn.torch: window_size {tuple(window_size)} is not supported: "
                         "(-1, -1), (-1, 0) or (W, 0)")
    if num_splits is not None and (not isinstance(num_splits, int) or num_splits < 0):
        raise ValueError(f"attn.torch: num_splits must be None or a whole number ≥ 0, got "
                         f"{num_splits!r}")
    if cu_seq_k is None and block_table is None:
        raise ValueError("attn.torch: cu_seq_k is needed unless the keys are pages (block_table)")
    is_causal = right == 0
    window = left + 1 if is_causal and left >= 0 else 0
    _check_devices(query, key, value, None)
    kv_heads = key.shape[2] if block_table is not None and key.dim() == 4 else key.shape[1]
    if not enable_gqa and kv_heads != query.shape[1]:
        raise ValueError(f"attn.torch: query has {query.shape[1]} heads and key {kv_heads}: "
                         "pass enable_gqa=True for grouped heads")
    out, lse = _varlen(query, key, value, cu_seq_q, cu_seq_k, is_causal, window, scale,
                       float(softcap), alibi_slopes, sinks, seqused_k, block_table)
    if return_aux is not None and getattr(return_aux, "lse", False):
        return out, lse
    return out


def varlen_attention_out(out: torch.Tensor, query: torch.Tensor, key: torch.Tensor,
                         value: torch.Tensor, cu_seq_q: torch.Tensor,
                         cu_seq_k: Optional[torch.Tensor], max_q: int, max_k: int, **options):
    """PyTorch's `varlen_attn_out`: `varlen_attention` with the result written into out, a tensor
    of the output's shape (copied there: the kernels write a buffer of their own). Not under
    autograd (as for PyTorch's out= functions). Returns out, or (out, lse) with return_aux.lse."""
    if torch.is_grad_enabled() and any(t.requires_grad for t in (query, key, value)):
        raise ValueError("attn.torch: varlen_attention_out does not take part in autograd; "
                         "call varlen_attention")
    result = varlen_attention(query, key, value, cu_seq_q, cu_seq_k, max_q, max_k, **options)
    computed = result[0] if isinstance(result, tuple) else result
    if out.shape != computed.shape:
        raise ValueError(f"attn.torch: out has shape {tuple(out.shape)}, the output "
                         f"{tuple(computed.shape)}")
    out.copy_(computed)
    return (out, result[1]) if isinstance(result, tuple) else out


# `with attn.torch.replace_sdpa():` — F.scaled_dot_product_attention on attn inside the block.
from ._torch_mode import replace_sdpa  # noqa: E402  (it calls scaled_dot_product_attention)
