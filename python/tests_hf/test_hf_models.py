"""Hugging Face models on attn's kernels (attn.hf): each family built from a small config with
random weights (nothing comes from a hub), loaded twice — attn_implementation="attn" and
transformers' own "eager" — with the same weights, and compared: logits of a left-padded
batch, greedy generation through the KV cache, one training step's gradients, bfloat16; and
the features attn does not compute yet refused by name. Run with the venv that
scripts/bootstrap --python makes (torch 2.13, transformers 5)."""
import copy
import pathlib
import sys

import pytest
import torch
import transformers
from transformers import (AutoModelForCausalLM, AutoModelForSeq2SeqLM, Gemma2Config, GPT2Config,
                          GptOssConfig, LlamaConfig, MistralConfig, Qwen2Config)

import attn.hf

# The kernels watched as tests_torch watches them (its attention_formulas module).
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "tests_torch"))
from attention_formulas import record_kernel_calls  # noqa: E402

attn.hf.register()

VOCAB = 1000
SMALL = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
             num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
             bos_token_id=1, eos_token_id=2, pad_token_id=0)
FAMILIES = {
    "gpt2": lambda: GPT2Config(vocab_size=VOCAB, n_embd=64, n_layer=2, n_head=4,
                               n_positions=256, bos_token_id=1, eos_token_id=2,
                               pad_token_id=0, attn_pdrop=0.0, resid_pdrop=0.0,
                               embd_pdrop=0.0),  # dropout: the training step compares exactly
    "llama": lambda: LlamaConfig(**SMALL),  # RoPE, GQA, RMSNorm, SwiGLU
    "qwen2": lambda: Qwen2Config(**SMALL),  # the same with biases on Q, K and V
    # A window shorter than the prompt, and far shorter than prompt + generated tokens.
    "mistral": lambda: MistralConfig(**SMALL, sliding_window=8),
    # Logit soft-capping, sliding and full layers alternating. Weights drawn wide and a low cap,
    # so that the cap bends the scores (at the usual 0.02 and 50 it would be the identity).
    "gemma2": lambda: Gemma2Config(**SMALL, head_dim=16, attn_logit_softcapping=2.0,
                                   sliding_window=8, initializer_range=0.2,
                                   final_logit_softcapping=None),
    # Attention sinks (learned, with gradients), sliding and full layers, a mixture of experts.
    "gpt_oss": lambda: GptOssConfig(**{**SMALL, "intermediate_size": 64}, head_dim=16,
                                    num_local_experts=2, num_experts_per_tok=1, sliding_window=8,
                                    initializer_range=0.2,
                                    layer_types=["sliding_attention", "full_attention"]),
}


def twin_models(family, dtype=torch.float32):
    """The family's model on attn and on eager, with the same random weights."""
    config = FAMILIES[family]()
    torch.manual_seed(0)
    eager = AutoModelForCausalLM.from_config(copy.deepcopy(config), attn_implementation="eager")
    ours = AutoModelForCausalLM.from_config(copy.deepcopy(config), attn_implementation="attn")
    ours.load_state_dict(eager.state_dict())
    assert ours.config._attn_implementation == "attn"
    return eager.to(dtype).eval(), ours.to(dtype).eval()


def left_padded_batch(length=20, padding=5):
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(3, VOCAB, (2, length), generator=g)
    mask = torch.ones(2, length, dtype=torch.long)
    mask[1, :padding] = 0
    ids[1, :padding] = 0
    return ids, mask


def worst_relative(ours, theirs, where=None):
    """max |ours − theirs| / max |theirs|; the plain max when theirs is all zeros (gpt-oss's
    router with one expert per token has no gradient)."""
    if where is not None:
        ours, theirs = ours[where], theirs[where]
    scale = theirs.abs().max()
    return ((ours - theirs).abs().max() / (scale if scale > 0 else 1.0)).item()


@pytest.mark.parametrize("family", list(FAMILIES))
def test_logits_are_eagers_on_a_left_padded_batch(family):
    eager, ours = twin_models(family)
    ids, mask = left_padded_batch()
    with torch.no_grad():
        theirs = eager(input_ids=ids, attention_mask=mask).logits
        got = ours(input_ids=ids, attention_mask=mask).logits
    # The padded positions' rows are nobody's answer (they see no real key).
    assert worst_relative(got, theirs, mask.bool()) < 1e-4


@pytest.mark.parametrize("family", list(FAMILIES))
def test_greedy_generation_through_the_cache_is_eagers(family):
    eager, ours = twin_models(family)
    ids, mask = left_padded_batch()
    settings = dict(attention_mask=mask, max_new_tokens=32, min_new_tokens=32, do_sample=False,
                    pad_token_id=0)
    theirs = eager.generate(ids, **settings)
    got = ours.generate(ids, **settings)
    assert got.shape == (2, 20 + 32)
    assert torch.equal(got, theirs)


def test_a_static_cache_with_padding_reaches_the_kernels_without_its_mask(monkeypatch):
    """generate() into a static cache (cache_implementation="static", the layout torch.compile
    wants) on a left-padded batch: the masks carry the padding and the cache's slots not yet
    written; attn.torch's operator reads them as key starts and key lengths, so every kernel call
    skips those keys instead of reading the mask, and the tokens are eager's."""
    masks_read = record_kernel_calls(monkeypatch, "sdpa", lambda args, kw: kw["mask"] is not None)
    eager, ours = twin_models("llama")
    ids, mask = left_padded_batch()
    settings = dict(attention_mask=mask, max_new_tokens=8, min_new_tokens=8, do_sample=False,
                    pad_token_id=0, cache_implementation="static")
    theirs = eager.generate(ids, **settings)
    got = ours.generate(ids, **settings)
    assert torch.equal(got, theirs)
    assert masks_read and not any(masks_read), masks_read


@pytest.mark.parametrize("family", list(FAMILIES))
def test_one_training_step_has_eagers_gradients(family):
    eager, ours = twin_models(family)
    ids, mask = left_padded_batch()
    # A label counts where its position and the one before are real tokens: the first real
    # token would be predicted from a padding row, which sees no key (attn: zeros, eager: the
    # mean of the values; neither is an answer).
    labels = ids.masked_fill(mask == 0, -100)
    labels[:, 1:] = labels[:, 1:].masked_fill(mask[:, :-1] == 0, -100)
    for model in (eager, ours):
        model.train()
        model(input_ids=ids, attention_mask=mask, labels=labels).loss.backward()
    theirs = dict(eager.named_parameters())
    for name, p in ours.named_parameters():
        assert worst_relative(p.grad, theirs[name].grad) < 1e-4, name


@pytest.mark.parametrize("family", list(FAMILIES))
def test_a_bfloat16_model_stays_within_bfloat16s_rounding(family):
    # attn runs a bfloat16 call with bf16 products and float32 sums and softmax (its bf16
    # tensors read in place), rounding the output once; eager rounds every step. Both against the
    # float32 model: attn's error may not exceed eager's by more than bfloat16's own step at the
    # largest logit (2^-8).
    reference, _ = twin_models(family)
    eager, ours = twin_models(family, torch.bfloat16)
    ids, mask = left_padded_batch()
    with torch.no_grad():
        exact = reference(input_ids=ids, attention_mask=mask).logits
        theirs = eager(input_ids=ids, attention_mask=mask).logits.float()
        got = ours(input_ids=ids, attention_mask=mask).logits.float()
    assert got.dtype == theirs.dtype
    valid = mask.bool()
    assert worst_relative(got, exact, valid) <= worst_relative(theirs, exact, valid) + 2 ** -8


@pytest.mark.parametrize("family", ["gpt2", "llama", "gemma2", "gpt_oss"])
def test_autocast_runs_attns_bf16_products_within_eagers_rounding(family, monkeypatch):
    """A float32 model inside torch.autocast("cpu"): its layers hand attention bfloat16 or, after
    a rotary embedding, float32 queries and keys with bfloat16 values; attn casts them as
    transformers' SDPA does and runs its bf16 kernels (their entry counted). Its logits stay as
    near the float32 model's as eager's under the same autocast, its gradients float32."""
    bf16_calls = record_kernel_calls(monkeypatch, "_torch_sdpa_bfloat16", lambda a, kw: True)
    float_calls = record_kernel_calls(monkeypatch, "sdpa", lambda a, kw: True)
    eager, ours = twin_models(family)
    ids, mask = left_padded_batch()
    with torch.no_grad():
        exact = eager(input_ids=ids, attention_mask=mask).logits
    with torch.autocast("cpu"):
        theirs = eager(input_ids=ids, attention_mask=mask).logits.float()
        got = ours.train()(input_ids=ids, attention_mask=mask).logits
    assert bf16_calls and not float_calls
    valid = mask.bool()
    assert worst_relative(got.float().detach(), exact, valid) <= \
        worst_relative(theirs.detach(), exact, valid) + 2 ** -8
    got.float()[valid].logsumexp(-1).sum().backward()
    grads = [p.grad for p in ours.parameters() if p.grad is not None]
    assert grads and all(g.dtype == torch.float32 and bool(g.isfinite().all()) for g in grads)


def test_an_sdpa_model_inside_replace_sdpa_runs_on_attn(monkeypatch):
    """The other way in, without attn.hf: a model loaded on transformers' own "sdpa", run inside
    `with attn.torch.replace_sdpa():`, gets attn's kernels for its F.scaled_dot_product_attention
    calls and gives eager's logits and greedy tokens on a left-padded batch."""
    import attn.torch as attn_torch
    calls = record_kernel_calls(monkeypatch, "sdpa", lambda args, kw: True)
    eager, _ = twin_models("llama")
    sdpa = AutoModelForCausalLM.from_config(copy.deepcopy(FAMILIES["llama"]()),
                                            attn_implementation="sdpa")
    sdpa.load_state_dict(eager.state_dict())
    sdpa.eval()
    ids, mask = left_padded_batch()
    settings = dict(attention_mask=mask, max_new_tokens=8, min_new_tokens=8, do_sample=False,
                    pad_token_id=0)
    with torch.no_grad():
        theirs = eager(input_ids=ids, attention_mask=mask).logits
        expected = eager.generate(ids, **settings)
        with attn_torch.replace_sdpa():
            got = sdpa(input_ids=ids, attention_mask=mask).logits
            tokens = sdpa.generate(ids, **settings)
    assert calls
    assert worst_relative(got, theirs, mask.bool()) < 1e-5
    assert torch.equal(tokens, expected)


def test_left_padding_runs_as_key_starts_not_as_a_dense_mask(monkeypatch, caplog):
    """A left-padded prompt and its cached steps reach the kernel as causal (or one row) with a
    first real key per entry; a sliding window keeps the dense mask. Counted at attn.torch's
    entry, the answers checked against eager by the tests above."""
    import attn.torch as attn_torch
    calls = []
    real_attend = attn_torch._attend

    def counting_attend(query, key, value, attn_mask, is_causal, scale, key_starts=None, *args):
        calls.append((attn_mask is not None, None if key_starts is None else key_starts.tolist()))
        return real_attend(query, key, value, attn_mask, is_causal, scale, key_starts, *args)

    monkeypatch.setattr(attn_torch, "_attend", counting_attend)
    monkeypatch.setattr(attn.hf, "_said_dense", False)
    caplog.set_level("INFO", logger="attn.hf")
    ids, mask = left_padded_batch()
    for family, compact in (("llama", True), ("mistral", False)):
        eager, ours = twin_models(family)
        calls.clear()
        with torch.no_grad():
            theirs = eager(input_ids=ids, attention_mask=mask).logits
            got = ours(input_ids=ids, attention_mask=mask).logits
        assert worst_relative(got, theirs, mask.bool()) < 1e-4
        if compact:
            assert calls and all(c == (False, [0, 5]) for c in calls), calls
            calls.clear()
            ours.generate(ids, attention_mask=mask, max_new_tokens=3, min_new_tokens=3,
                          do_sample=False, pad_token_id=0)
            assert calls and all(c == (False, [0, 5]) for c in calls), calls
        else:  # the window is in the mask: attn reads it as it is, and says so once
            assert calls and all(c[0] and c[1] is None for c in calls), calls
            said = [r.getMessage() for r in caplog.records if r.name == "attn.hf"]
            assert len(said) == 1 and "hands it on as it is" in said[0], said


def test_attention_dropout_in_training_is_refused_by_name():
    config = LlamaConfig(**SMALL, attention_dropout=0.1)
    model = AutoModelForCausalLM.from_config(config, attn_implementation="attn").train()
    ids, mask = left_padded_batch()
    with pytest.raises(ValueError, match=r"LlamaAttention \(llama\).*attention dropout"):
        model(input_ids=ids, attention_mask=mask)
    model.eval()  # no dropout at inference: attn runs it
    model(input_ids=ids, attention_mask=mask)


def t5_twins():
    """A random 2-layer T5 (its learned relative position bias added to the scores, unscaled
    scores, an encoder, a causal decoder with cross-attention) on attn and on eager."""
    config = transformers.T5Config(vocab_size=VOCAB, d_model=64, d_kv=16, d_ff=128, num_layers=2,
                                   num_heads=4, dropout_rate=0.0, decoder_start_token_id=0,
                                   pad_token_id=0, eos_token_id=1)
    torch.manual_seed(0)
    eager = AutoModelForSeq2SeqLM.from_config(copy.deepcopy(config), attn_implementation="eager")
    ours = AutoModelForSeq2SeqLM.from_config(copy.deepcopy(config), attn_implementation="attn")
    ours.load_state_dict(eager.state_dict())
    return eager, ours


def test_t5s_position_bias_gives_eagers_logits_tokens_and_gradients():
    """T5's bias reaches attn as one float mask (the bias where the padding mask allows): the
    logits of a right-padded batch, greedy tokens through the cache, and one training step's
    gradients — the relative bias's embedding's too, through attn's mask gradient."""
    eager, ours = t5_twins()
    ids, mask = left_padded_batch(length=12, padding=4)
    ids, mask = ids.flip(1), mask.flip(1)  # T5 pads on the right
    decoder_ids = torch.randint(3, VOCAB, (2, 7), generator=torch.Generator().manual_seed(2))
    eager.eval(), ours.eval()
    with torch.no_grad():
        theirs = eager(input_ids=ids, attention_mask=mask, decoder_input_ids=decoder_ids).logits
        got = ours(input_ids=ids, attention_mask=mask, decoder_input_ids=decoder_ids).logits
    assert worst_relative(got, theirs) < 1e-4
    settings = dict(attention_mask=mask, max_new_tokens=10, min_new_tokens=10, do_sample=False)
    assert torch.equal(ours.generate(ids, **settings), eager.generate(ids, **settings))
    for model in (eager, ours):
        model.train()
        model(input_ids=ids, attention_mask=mask, labels=decoder_ids).loss.backward()
    theirs = dict(eager.named_parameters())
    biases = [name for name in theirs if "relative_attention_bias" in name]
    assert len(biases) == 2 and all(theirs[name].grad.abs().max() > 0 for name in biases)
    for name, p in ours.named_parameters():
        assert worst_relative(p.grad, theirs[name].grad) < 1e-4, name


# More families, each with something of its own in its attention layer, for the two cheapest
# checks (a left-padded batch's logits and greedy tokens through the cache).
MORE_FAMILIES = {
    "qwen3": lambda: transformers.Qwen3Config(**SMALL, head_dim=16),  # RMSNorm on q and k
    "gemma3": lambda: transformers.Gemma3TextConfig(**SMALL, head_dim=16, sliding_window=8),
    "phi3": lambda: transformers.Phi3Config(**SMALL),  # one fused QKV projection
    "granite": lambda: transformers.GraniteConfig(**SMALL, attention_multiplier=0.3),  # scaling
    "smollm3": lambda: transformers.SmolLM3Config(**SMALL),  # layers without RoPE
    "falcon": lambda: transformers.FalconConfig(vocab_size=VOCAB, hidden_size=64,
                                                num_hidden_layers=2, num_attention_heads=4,
                                                new_decoder_architecture=True, num_kv_heads=2,
                                                bos_token_id=1, eos_token_id=2, pad_token_id=0),
    "opt": lambda: transformers.OPTConfig(vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2,
                                          num_attention_heads=4, ffn_dim=128,
                                          word_embed_proj_dim=64, bos_token_id=1,
                                          eos_token_id=2, pad_token_id=0),
    "gpt_neox": lambda: transformers.GPTNeoXConfig(vocab_size=VOCAB, hidden_size=64,
                                                   num_hidden_layers=2, num_attention_heads=4,
                                                   intermediate_size=128, bos_token_id=1,
                                                   eos_token_id=2, pad_token_id=0),
}


@pytest.mark.parametrize("family", list(MORE_FAMILIES))
def test_more_families_give_eagers_logits_and_tokens(family):
    config = MORE_FAMILIES[family]()
    torch.manual_seed(0)
    eager = AutoModelForCausalLM.from_config(copy.deepcopy(config), attn_implementation="eager")
    ours = AutoModelForCausalLM.from_config(copy.deepcopy(config), attn_implementation="attn")
    ours.load_state_dict(eager.state_dict())
    eager.eval(), ours.eval()
    ids, mask = left_padded_batch()
    with torch.no_grad():
        theirs = eager(input_ids=ids, attention_mask=mask).logits
        got = ours(input_ids=ids, attention_mask=mask).logits
    assert worst_relative(got, theirs, mask.bool()) < 1e-4
    settings = dict(attention_mask=mask, max_new_tokens=16, min_new_tokens=16, do_sample=False,
                    pad_token_id=0)
    assert torch.equal(ours.generate(ids, **settings), eager.generate(ids, **settings))


@pytest.mark.parametrize("config", [
    lambda: transformers.BloomConfig(vocab_size=VOCAB, hidden_size=64, n_layer=2, n_head=4),
    lambda: transformers.XGLMConfig(vocab_size=VOCAB, d_model=64, num_layers=2,
                                    attention_heads=4, ffn_dim=128),
], ids=["bloom", "xglm"])
def test_a_model_that_computes_attention_itself_is_refused_by_name(config):
    """BLOOM and XGLM compute attention in their own layers: loaded with "attn", they would
    never call it and would add attn's boolean mask to their scores (BLOOM's left-padded logits
    came out 1.5 % off eager's). Refused at the first forward, naming the model."""
    model = AutoModelForCausalLM.from_config(config(), attn_implementation="attn").eval()
    ids, mask = left_padded_batch()
    name = model.config.model_type
    with pytest.raises(ValueError, match=f"{name} computes attention in its own code"):
        model(input_ids=ids, attention_mask=mask)


ENCODERS = {
    "bert": lambda: transformers.BertConfig(vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2,
                                            num_attention_heads=4, intermediate_size=128),
    # Local (sliding) and global layers alternating.
    "modernbert": lambda: transformers.ModernBertConfig(
        vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=128, local_attention=4, pad_token_id=0, bos_token_id=1,
        eos_token_id=2, cls_token_id=1, sep_token_id=2),
    "bart": lambda: transformers.BartConfig(vocab_size=VOCAB, d_model=64, encoder_layers=1,
                                            decoder_layers=1, encoder_attention_heads=4,
                                            decoder_attention_heads=4, encoder_ffn_dim=128,
                                            decoder_ffn_dim=128),
}


@pytest.mark.parametrize("family", list(ENCODERS))
def test_encoders_give_eagers_hidden_states(family):
    """Bidirectional attention over a right-padded batch (and BART's decoder and cross-attention):
    the last hidden states of the real positions."""
    config = ENCODERS[family]()
    torch.manual_seed(0)
    eager = transformers.AutoModel.from_config(copy.deepcopy(config), attn_implementation="eager")
    ours = transformers.AutoModel.from_config(copy.deepcopy(config), attn_implementation="attn")
    ours.load_state_dict(eager.state_dict())
    ids, mask = left_padded_batch(length=12, padding=4)
    inputs = dict(input_ids=ids.flip(1), attention_mask=mask.flip(1))
    if family == "bart":
        inputs["decoder_input_ids"] = ids[:, :7]
    with torch.no_grad():
        theirs = eager.eval()(**inputs).last_hidden_state
        got = ours.eval()(**inputs).last_hidden_state
    real = inputs["attention_mask"].bool() if family != "bart" else None
    assert worst_relative(got, theirs, real) < 1e-4


def close_weights(ours, theirs, real_rows):
    """Each layer's weights (batch, heads, Tq, Tk) against eager's on the rows of real tokens
    (a padding position sees no key: zeros on attn, an even spread on eager)."""
    assert len(ours) == len(theirs) > 0
    for layer, (got, expected) in enumerate(zip(ours, theirs)):
        assert got.shape == expected.shape, layer
        rows = real_rows[:, None, :].expand(got.shape[:3])
        assert worst_relative(got, expected, rows) < 1e-5, layer


@pytest.mark.parametrize("family", ["gpt2", "llama", "mistral", "gemma2", "gpt_oss"])
def test_output_attentions_gives_eagers_weights(family):
    """output_attentions=True returns every layer's weights as eager does — under GQA, the
    padding, Mistral's and Gemma 2's windows, Gemma 2's cap and gpt-oss's sinks; GPT-2 keeps the
    keyword from its layers, and attn reads what the model collects — and leaves the logits as
    they are without them."""
    eager, ours = twin_models(family)
    ids, mask = left_padded_batch()
    with torch.no_grad():
        theirs = eager(input_ids=ids, attention_mask=mask, output_attentions=True)
        got = ours(input_ids=ids, attention_mask=mask, output_attentions=True)
        plain = ours(input_ids=ids, attention_mask=mask).logits
    close_weights(got.attentions, theirs.attentions, mask.bool())
    assert torch.equal(got.logits, plain)


def test_output_attentions_of_packed_documents_and_of_t5():
    """The weights follow the mask as it came: packed documents (block-diagonal, read as one
    varlen call for the output), and T5's position bias folded into the mask."""
    eager, ours = twin_models("llama")
    ids, positions = packed_documents()
    with torch.no_grad():
        theirs = eager(input_ids=ids, position_ids=positions, use_cache=False,
                       output_attentions=True).attentions
        got = ours(input_ids=ids, position_ids=positions, use_cache=False,
                   output_attentions=True).attentions
    close_weights(got, theirs, torch.ones(ids.shape, dtype=torch.bool))
    eager, ours = t5_twins()
    ids, mask = left_padded_batch(length=12, padding=4)
    ids, mask = ids.flip(1), mask.flip(1)
    decoder_ids = torch.randint(3, VOCAB, (2, 7), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        theirs = eager.eval()(input_ids=ids, attention_mask=mask, decoder_input_ids=decoder_ids,
                              output_attentions=True)
        got = ours.eval()(input_ids=ids, attention_mask=mask, decoder_input_ids=decoder_ids,
                          output_attentions=True)
    close_weights(got.encoder_attentions, theirs.encoder_attentions, mask.bool())
    close_weights(got.decoder_attentions, theirs.decoder_attentions,
                  torch.ones(decoder_ids.shape, dtype=torch.bool))
    close_weights(got.cross_attentions, theirs.cross_attentions,
                  torch.ones(decoder_ids.shape, dtype=torch.bool))


def loss_on_weights(weights, real_rows, seed=5):
    """A loss that weighs every layer's weights on the rows of real tokens (a padding position
    sees no key: zeros on attn, an even spread on eager) by fixed random numbers."""
    g = torch.Generator().manual_seed(seed)
    total = 0.0
    for w in weights:
        rows = real_rows[:, None, :, None].expand(w.shape).float()
        total = total + (w * torch.randn(w.shape, generator=g) * rows).sum()
    return total


@pytest.mark.parametrize("family", ["gpt2", "llama", "gemma2", "gpt_oss"])
def test_a_loss_on_the_weights_has_eagers_gradients(family):
    """output_attentions under autograd: a loss on the weights and the logits reaches every
    parameter as eager's does — through q and k, Gemma 2's cap, gpt-oss's sinks."""
    eager, ours = twin_models(family)
    ids, mask = left_padded_batch()
    grads = []
    for model in (eager, ours):
        out = model.train()(input_ids=ids, attention_mask=mask, output_attentions=True)
        loss = loss_on_weights(out.attentions, mask.bool()) + out.logits[mask.bool()].square().mean()
        model.zero_grad()
        loss.backward()
        grads.append({n: p.grad for n, p in model.named_parameters() if p.grad is not None})
    theirs, got = grads
    assert got.keys() == theirs.keys()
    for name in theirs:
        assert worst_relative(got[name], theirs[name]) < 1e-4, name


def test_a_loss_on_t5s_weights_reaches_its_position_bias():
    eager, ours = t5_twins()
    ids, mask = left_padded_batch(length=12, padding=4)
    ids, mask = ids.flip(1), mask.flip(1)
    decoder_ids = torch.randint(3, VOCAB, (2, 7), generator=torch.Generator().manual_seed(2))
    grads = []
    for model in (eager, ours):
        out = model.train()(input_ids=ids, attention_mask=mask, decoder_input_ids=decoder_ids,
                            output_attentions=True)
        decoder_rows = torch.ones(decoder_ids.shape, dtype=torch.bool)
        loss = (loss_on_weights(out.encoder_attentions, mask.bool())
                + loss_on_weights(out.decoder_attentions, decoder_rows, seed=6)
                + loss_on_weights(out.cross_attentions, decoder_rows, seed=7))
        model.zero_grad()
        loss.backward()
        grads.append({n: p.grad for n, p in model.named_parameters() if p.grad is not None})
    theirs, got = grads
    assert any("relative_attention_bias" in name for name in theirs)
    assert got.keys() == theirs.keys()
    for name in theirs:
        assert worst_relative(got[name], theirs[name]) < 1e-4, name


def packed_documents(lengths=(5, 12, 3, 20)):
    """Documents laid end to end in one row, position_ids restarting at each (what
    DataCollatorWithFlattening gives): transformers masks them block-diagonal causal."""
    g = torch.Generator().manual_seed(2)
    ids = torch.randint(3, VOCAB, (1, sum(lengths)), generator=g)
    positions = torch.cat([torch.arange(n) for n in lengths])[None]
    return ids, positions


@pytest.mark.parametrize("family", ["llama", "mistral", "gemma2"])
def test_packed_documents_run_as_one_varlen_call_with_eagers_answers(family, monkeypatch):
    """Packed documents (and the window of Mistral's and Gemma 2's sliding layers, 8 keys,
    shorter than two of the documents) reach attn as attn.torch.varlen_attention over the row,
    never as the dense mask: eager's logits and training gradients, every layer routed."""
    import attn.torch as attn_torch
    windows = []
    real_varlen = attn_torch.varlen_attention

    def counting_varlen(*args, **kwargs):
        windows.append(kwargs["window_size"])
        return real_varlen(*args, **kwargs)

    monkeypatch.setattr(attn_torch, "varlen_attention", counting_varlen)
    eager, ours = twin_models(family)
    ids, positions = packed_documents()
    # use_cache=False: transformers reads position_ids for packing only without a cache.
    for model in (eager, ours):
        model.train()
        out = model(input_ids=ids, position_ids=positions, labels=ids, use_cache=False)
        out.loss.backward()
        model.logits = out.logits.detach()
    assert worst_relative(ours.logits, eager.logits) < 1e-4
    theirs = dict(eager.named_parameters())
    for name, p in ours.named_parameters():
        assert worst_relative(p.grad, theirs[name].grad) < 1e-4, name
    expected = {"llama": [(-1, 0)] * 2, "mistral": [(7, 0)] * 2, "gemma2": [(7, 0), (-1, 0)]}
    assert windows == expected[family]
    # Without the documents (one causal row), the same model gives other logits: the test sees
    # whether the packing was honoured.
    with torch.no_grad():
        whole = ours(input_ids=ids, use_cache=False).logits
    assert worst_relative(whole, eager.logits) > 1e-2


@pytest.mark.parametrize("family", ["llama", "gemma2"])
def test_packed_documents_in_bfloat16_stay_within_bfloat16s_rounding(family):
    """The varlen call on bfloat16 tensors (bf16 products, float32 softmax), as the left-padded
    bfloat16 test above: against the float32 model, attn's error within eager's plus 2^-8."""
    reference, _ = twin_models(family)
    eager, ours = twin_models(family, torch.bfloat16)
    ids, positions = packed_documents()
    inputs = dict(input_ids=ids, position_ids=positions, use_cache=False)
    with torch.no_grad():
        exact = reference(**inputs).logits
        theirs = eager(**inputs).logits.float()
        got = ours(**inputs).logits.float()
    assert worst_relative(got, exact) <= worst_relative(theirs, exact) + 2 ** -8


def mask_of_documents(lengths, window=0, batch=1):
    length = sum(lengths)
    document = torch.repeat_interleave(torch.arange(len(lengths)), torch.tensor(lengths))
    rows = torch.arange(length)
    seen = (document[:, None] == document[None, :]) & (rows[None, :] <= rows[:, None])
    if window:
        seen &= rows[None, :] > rows[:, None] - window
    return seen[None, None].expand(batch, 1, length, length).clone()


def test_the_documents_are_read_from_the_mask_or_the_mask_is_left_dense():
    offsets, window = attn.hf._packed_sequences(mask_of_documents([3, 1, 4]))
    assert offsets.tolist() == [0, 3, 4, 8] and offsets.dtype == torch.int32 and window == 0
    offsets, window = attn.hf._packed_sequences(mask_of_documents([6, 2, 5], window=3, batch=2))
    assert offsets.tolist() == [0, 6, 8, 13, 19, 21, 26] and window == 3
    assert attn.hf._packed_sequences(mask_of_documents([7], window=7))[1] == 0  # a full window
    def flipped(mask, row, key):
        mask[0, 0, row, key] = ~mask[0, 0, row, key]
        return mask

    for not_runs in [
        flipped(mask_of_documents([4, 4]), 5, 6),  # a key ahead of the row
        flipped(mask_of_documents([8]), 0, 0),  # a row that sees no key
        flipped(mask_of_documents([8]), 5, 2),  # a hole in a run
        flipped(mask_of_documents([4, 4]), 5, 2),  # a key of the document before
        torch.ones(1, 1, 8, 8, dtype=torch.bool),  # bidirectional
        mask_of_documents([4, 4]) | mask_of_documents([4, 4]).transpose(2, 3),  # each one so
    ]:
        assert attn.hf._packed_sequences(not_runs) is None
    windows_differ = mask_of_documents([10], window=3)
    windows_differ[0, 0, 9, 6] = True  # row 9 sees 4 keys, the others 3
    assert attn.hf._packed_sequences(windows_differ) is None
    assert attn.hf._packed_sequences(mask_of_documents([4, 4]).float()) is None
    assert attn.hf._packed_sequences(mask_of_documents([4, 4])[..., :1, :]) is None  # one row
    changed = mask_of_documents([4, 4])
    assert attn.hf._packed_sequences(changed)[0].tolist() == [0, 4, 8]
    changed[0, 0, 5, 3] = True  # in place: the answer is not the cached one
    assert attn.hf._packed_sequences(changed) is None


def test_masks_made_under_inference_mode_are_read_too():
    """torch.inference_mode's tensors keep no version counter, by which attn.hf tells a mask
    changed in place: a left-padded batch and packed documents give no_grad's logits."""
    _, ours = twin_models("mistral")
    ids, mask = left_padded_batch()
    packed, positions = packed_documents()
    calls = [dict(input_ids=ids, attention_mask=mask),
             dict(input_ids=packed, position_ids=positions, use_cache=False)]
    for kwargs in calls:
        with torch.no_grad():
            expected = ours(**kwargs).logits
        with torch.inference_mode():
            got = ours(**kwargs).logits
        assert torch.equal(got, expected)


def test_a_compiled_model_traces_attn_whole_and_gives_eagers_logits(monkeypatch):
    """torch.compile(fullgraph=True) of a model on attn: the layers' calls and attn.hf's questions
    about the mask trace without a graph break (fullgraph raises at one), unpadded and
    left-padded, with eager's logits. Traced, attn.hf cannot read the mask and hands it on as it
    is; the operator reads it when it runs, and the kernels still get the padding as key
    starts, causal, no mask. (backend="eager": Dynamo's trace, which is what fullgraph checks,
    without Inductor's code generation, a minute of CI's time.)"""
    kernel_calls = record_kernel_calls(
        monkeypatch, "sdpa", lambda args, kw: (kw["mask"] is None, kw["causal"], kw["key_starts"]))
    eager, ours = twin_models("llama")
    compiled = torch.compile(ours, fullgraph=True, backend="eager")
    ids, mask = left_padded_batch()
    with torch.no_grad():
        assert worst_relative(compiled(input_ids=ids).logits, eager(input_ids=ids).logits) < 1e-5
        kernel_calls.clear()
        got = compiled(input_ids=ids, attention_mask=mask).logits
        theirs = eager(input_ids=ids, attention_mask=mask).logits
    assert worst_relative(got, theirs, mask.bool()) < 1e-5
    assert kernel_calls == [(True, True, [0, 5])] * 2, kernel_calls


def test_packed_documents_in_a_compiled_model_run_as_one_varlen_call(monkeypatch):
    """Traced, attn.hf cannot read the mask of packed documents either; attn.torch's operator
    does when it runs, and hands the rows to the varlen kernels with the documents' offsets
    (Mistral: its window too): eager's logits, no kernel call reading the mask."""
    varlen_offsets = record_kernel_calls(monkeypatch, "sdpa_varlen",
                                         lambda args, kw: (args[-2], kw["window"]))
    dense_masks = record_kernel_calls(monkeypatch, "sdpa", lambda args, kw: kw["mask"] is not None)
    eager, ours = twin_models("mistral")
    ids, positions = packed_documents()
    compiled = torch.compile(ours, fullgraph=True, backend="eager")
    with torch.no_grad():
        got = compiled(input_ids=ids, position_ids=positions, use_cache=False).logits
        theirs = eager(input_ids=ids, position_ids=positions, use_cache=False).logits
    assert worst_relative(got, theirs) < 1e-5
    assert varlen_offsets == [([0, 5, 17, 20, 40], 8)] * 2 and not any(dense_masks), (
        varlen_offsets, dense_masks)
