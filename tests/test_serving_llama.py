"""Our NumPy Llama (serving/llama.py) on SmolLM2-135M-Instruct's real weights equals transformers.

The model file is installed by `make install` (serving/model_files.py); without it these tests skip with
that one-line reason. The file is read once per module; BLAS and torch run one thread each here so two
pytest workers on two cores do not oversubscribe.
"""
from __future__ import annotations

import numpy as np
import pytest

from scaleoutai.errors import UserError
from scaleoutai.serving import llama, model_files

PROMPTS = ["What is the capital of France?",
           "Name three primary colours.",
           [{"role": "system", "content": "Answer from the passage only."},
            {"role": "user", "content": "Passage: The capital of Velmora is Ostrin.\nQuestion: What is the capital "
                                        "of Velmora?"}]]
NEW_TOKENS = 20
LOGIT_ATOL = 2e-3  # float32 in both; measured max |ours - transformers| about 1e-4 on logits of size ~40


@pytest.fixture(scope="module")
def real(smollm2):
    import torch
    from threadpoolctl import threadpool_limits

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    with threadpool_limits(1):
        yield {**smollm2, "ref": llama.reference_model(smollm2["w"])}
    torch.set_num_threads(threads)


def test_missing_model_file_is_a_one_line_user_error_naming_make_install(tmp_path):
    with pytest.raises(UserError) as e:
        model_files.model_path(tmp_path / "absent.gguf")
    assert "make install" in str(e.value) and "\n" not in str(e.value)


def test_config_read_from_the_file_is_smollm2_with_grouped_query_attention(real):
    c = real["w"].config
    assert (c.n_layers, c.d_model, c.n_heads, c.n_kv_heads, c.d_head, c.d_ff, c.vocab) == (30, 576, 9, 3, 64, 1536,
                                                                                            49152)
    assert c.rope_theta == 100000.0 and c.tied and real["w"].head is real["w"].embed
    assert c.kv_bytes_per_token() == 2 * 30 * 3 * 64 * 4  # a third of multi-head attention's 2 * 30 * 9 * 64 * 4
    L = real["w"].layers[0]
    assert L["wq"].shape == (576, 576) and L["wk"].shape == L["wv"].shape == (3 * 64, 576)
    assert set(real["file"].qtypes.values()) == {"Q4_1", "Q8_0", "F32"}
    assert all(t.dtype == np.float32 for t in real["file"].tensors.values())


def test_from_scratch_q4_1_dequantization_equals_gguf(real):
    f = real["file"]
    names = [n for n, q in f.qtypes.items() if q == "Q4_1"][:6]
    for n in names:
        np.testing.assert_array_equal(model_files.dequantize_q4_1(f.raw[n]), f.tensors[n])
    assert f.stored_bytes < 4 * f.n_params / 5  # about 5 bits per Q4_1 weight, 8.5 for Q8_0


@pytest.mark.parametrize("T,H,Hkv,start", [(5, 9, 3, 0), (1, 9, 3, 11), (7, 8, 1, 4), (6, 4, 4, 2)])
def test_gqa_attention_equals_torch_sdpa_with_grouped_heads(T, H, Hkv, start):
    import torch
    import torch.nn.functional as F

    rng = np.random.default_rng(T * H + Hkv)
    S, dh = start + T, 16
    q = rng.standard_normal((T, H, dh)).astype(np.float32)
    k, v = (rng.standard_normal((S, Hkv, dh)).astype(np.float32) for _ in range(2))
    ours = llama.gqa_attention(q, k, v, start)
    assert ours.shape == (T, H * dh)
    mask = torch.tensor(np.arange(S)[None, :] <= (start + np.arange(T))[:, None])
    ref = F.scaled_dot_product_attention(torch.tensor(q).transpose(0, 1)[None], torch.tensor(k).transpose(0, 1)[None],
                                         torch.tensor(v).transpose(0, 1)[None], attn_mask=mask, enable_gqa=True)
    np.testing.assert_allclose(ours, ref[0].transpose(0, 1).reshape(T, H * dh).numpy(), rtol=1e-5, atol=1e-5)
    # a KV head shared by a group equals multi-head attention with that head repeated for each query head
    rep = llama.gqa_attention(q, np.repeat(k, H // Hkv, axis=1), np.repeat(v, H // Hkv, axis=1), start)
    np.testing.assert_allclose(ours, rep, rtol=1e-6, atol=1e-6)


def test_logits_equal_transformers_on_the_same_weights(real):
    for prompt in PROMPTS[:2]:
        ids = llama.chat_ids(real["tok"], prompt)
        ours, ref = llama.forward(real["w"], ids), llama.reference_logits(real["ref"], ids)
        assert ours.shape == ref.shape == (len(ids), 49152)
        np.testing.assert_allclose(ours, ref, rtol=0, atol=LOGIT_ATOL)
        assert np.array_equal(ours.argmax(-1), ref.argmax(-1))


def test_cached_decode_and_chunked_prefill_equal_the_full_forward(real):
    w = real["w"]
    ids = llama.chat_ids(real["tok"], PROMPTS[0])
    full = llama.forward(w, ids)
    cache = llama.KVCache(w.config, len(ids))
    split = len(ids) - 6
    rows = [llama.forward(w, ids[:split // 2], cache), llama.forward(w, ids[split // 2:split], cache)]
    rows += [llama.forward(w, [t], cache) for t in ids[split:]]  # one token per step, attending over the cache
    np.testing.assert_allclose(np.concatenate(rows), full, rtol=0, atol=1e-3)
    assert cache.length == len(ids) and cache.nbytes == len(ids) * w.config.kv_bytes_per_token()
    with pytest.raises(ValueError, match="cache holds"):
        llama.forward(w, [1], cache)


@pytest.mark.slow
def test_greedy_answers_equal_transformers_token_for_token(real):
    w, tok = real["w"], real["tok"]
    for prompt in PROMPTS:
        ids = llama.chat_ids(tok, prompt)
        ours = llama.generate(w, ids, NEW_TOKENS)
        ref = llama.reference_generate(real["ref"], ids, NEW_TOKENS, w.config.eos_id)
        assert ours == ref, (tok.decode(ours), tok.decode(ref))
        assert 1 <= len(ours) <= NEW_TOKENS and tok.decode(ours).strip()
    paris = tok.decode(llama.generate(w, llama.chat_ids(tok, PROMPTS[0]), NEW_TOKENS))
    assert "Paris" in paris


@pytest.mark.slow
def test_reference_weights_equal_transformers_own_gguf_loader(real):
    """The reference holds exactly what transformers' GGUF loader (the one `from_pretrained(gguf_file=...)`
    runs) reads from the file: its loader un-permutes Wq and Wk as `unpermute_qk` does."""
    import torch
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    theirs = load_gguf_checkpoint(str(real["file"].path), return_tensors=True, model_to_load=real["ref"])["tensors"]
    ours = real["ref"].state_dict()
    assert set(theirs) <= set(ours) and len(theirs) == 1 + 1 + 9 * 30  # embedding (tied head), final norm, layers
    for k, t in theirs.items():
        assert torch.equal(torch.as_tensor(t, dtype=torch.float32), ours[k]), k


@pytest.mark.slow
def test_the_tokenizer_converted_once_is_kept_beside_the_model_and_reads_back_the_same(tmp_path):
    try:
        real_file = model_files.model_path()
    except UserError as e:
        pytest.skip(str(e))
    link = tmp_path / real_file.name
    link.symlink_to(real_file)
    converted = model_files.load_tokenizer(link)
    saved = model_files.tokenizer_dir(link)
    assert (saved / "tokenizer.json").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([link.name, saved.name])  # no temporary left
    again = model_files.load_tokenizer(link)
    for messages in (PROMPTS[0], "What is 2 + 3?", [{"role": "system", "content": "Be brief."},
                                                    {"role": "user", "content": "Hi"}]):
        ids = llama.chat_ids(converted, messages)
        assert llama.chat_ids(again, messages) == ids and again.decode(ids) == converted.decode(ids)
    assert (again.eos_token_id, again.bos_token_id, len(again)) == (converted.eos_token_id, converted.bos_token_id,
                                                                     len(converted))
