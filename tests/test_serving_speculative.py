"""Speculative decoding: the rejection rule keeps the target's distribution, greedy equals target greedy,
tokens per target pass follow (1 - a^(k+1)) / (1 - a), transformers' assisted generation agrees."""
import numpy as np
import pytest
from scipy import stats

from scaleoutai.serving.decoder import decoder_forward, decoder_init, generate
from scaleoutai.serving.speculative import (acceptance_rate, damp_upper_blocks, draft_by_layer_skip,
                                            expected_speedup, expected_tokens_per_pass, modelled_speedup,
                                            softmax_probs, speculative_accept, speculative_generate)


def _dists(V, rows, seed, sharp=1.5):
    rng = np.random.default_rng(seed)
    return softmax_probs(sharp * rng.standard_normal((rows, V)))


def _chi2_pvalue(counts, probs):
    return stats.chisquare(counts, probs * counts.sum()).pvalue


def test_the_rejection_rule_emits_exactly_the_target_distribution_first_and_second_token():
    """Context-free p, q over V = 6: the first two emitted tokens are p_0 x p_1, whatever q proposes."""
    V, k, n = 6, 3, 12000
    p, q = _dists(V, k + 1, 1), _dists(V, k, 2)
    rng = np.random.default_rng(0)
    joint = np.zeros((V, V))
    first_only = np.zeros(V)
    for _ in range(n):
        drafted = np.array([rng.choice(V, p=q[i]) for i in range(k)])
        out, _ = speculative_accept(p, q, drafted, rng)
        first_only[out[0]] += 1
        if len(out) > 1:
            joint[out[0], out[1]] += 1
    assert _chi2_pvalue(first_only, p[0]) > 1e-3
    tv = 0.5 * np.abs(first_only / n - p[0]).sum()
    assert tv < 0.025, tv  # ~ 0.5 sum sqrt(2 p / (pi n)) ~ 0.008 expected at n = 12000
    # second token given the first was an accepted draft: the pair distribution is p_0(a) p_1(b) restricted to
    # rounds that went on; check the conditional of the second token instead, which must be p_1
    second = joint.sum(axis=0)
    assert _chi2_pvalue(second, p[1]) > 1e-3


def test_a_rule_without_the_residual_is_caught_by_the_same_statistic():
    """Negative control: resampling from p itself on rejection (not from max(0, p - q)) biases the output."""
    V, n = 6, 12000
    p, q = _dists(V, 2, 1), _dists(V, 1, 2)
    rng = np.random.default_rng(0)
    counts = np.zeros(V)
    for _ in range(n):
        x = rng.choice(V, p=q[0])
        y = x if rng.random() < min(1.0, p[0, x] / q[0, x]) else rng.choice(V, p=p[0])
        counts[y] += 1
    assert _chi2_pvalue(counts, p[0]) < 1e-6


@pytest.mark.slow
def test_speculative_sampling_on_the_decoder_matches_the_targets_exact_two_token_distribution():
    V = 6
    target = decoder_init(vocab=V, d_model=16, n_heads=2, n_layers=2, d_ff=32, max_len=16, seed=3)
    draft = decoder_init(vocab=V, d_model=8, n_heads=1, n_layers=1, d_ff=16, max_len=16, seed=9)
    prompt = np.array([1, 4, 2])
    p1 = softmax_probs(decoder_forward(target, prompt[None])[0, -1])
    exact = np.array([p1[a] * softmax_probs(decoder_forward(target, np.r_[prompt, a][None])[0, -1])
                      for a in range(V)])  # (V, V): P(y1 = a, y2 = b)
    n = 1500
    counts = np.zeros((V, V))
    for s in range(n):
        y, _ = speculative_generate(target, draft, prompt, 2, k=2, seed=s)
        counts[y[0], y[1]] += 1
    keep = exact.ravel() * n >= 5
    obs = np.r_[counts.ravel()[keep], counts.ravel()[~keep].sum()]
    exp = np.r_[exact.ravel()[keep], exact.ravel()[~keep].sum()]
    assert stats.chisquare(obs, exp * n).pvalue > 1e-3
    assert 0.5 * np.abs(counts / n - exact).sum() < 0.1  # ~ 0.04 expected over 36 cells at n = 1500


@pytest.mark.parametrize("k", [1, 3, 7])
@pytest.mark.parametrize("n_kv_heads", [4, 1])
def test_greedy_speculative_decoding_emits_the_targets_greedy_tokens(k, n_kv_heads):
    target = decoder_init(vocab=40, d_model=32, n_heads=4, n_layers=3, d_ff=48, max_len=64, seed=1,
                          n_kv_heads=n_kv_heads)
    prompt = np.array([3, 1, 4, 1, 5])
    want = generate(target, [prompt], 30)[0]
    for draft in (draft_by_layer_skip(target, 1), decoder_init(vocab=40, d_model=16, n_heads=2, n_layers=1,
                                                               d_ff=16, max_len=64, seed=5)):
        got, st = speculative_generate(target, draft, prompt, 30, k=k, greedy=True)
        assert got == want
        assert st.rounds < 31 and st.emitted >= 30


def test_a_draft_equal_to_the_target_is_always_accepted():
    target = decoder_init(vocab=30, d_model=16, n_heads=2, n_layers=2, d_ff=16, max_len=64, seed=2)
    _, st = speculative_generate(target, target, np.array([1, 2]), 20, k=4, seed=0)
    assert st.rejected == 0 and st.acceptance == 1.0 and st.rounds == 4  # 5 tokens per pass


def test_tokens_per_pass_follow_leviathans_formula_in_simulation():
    V, k, rounds = 5, 4, 8000
    p, q = _dists(V, 1, 7, sharp=1.0)[0], _dists(V, 1, 8, sharp=1.0)[0]
    alpha = acceptance_rate(p, q)
    P, Q = np.tile(p, (k + 1, 1)), np.tile(q, (k, 1))
    rng = np.random.default_rng(1)
    emitted = [len(speculative_accept(P, Q, rng.choice(V, size=k, p=q), rng)[0]) for _ in range(rounds)]
    want = expected_tokens_per_pass(alpha, k)
    se = np.std(emitted) / np.sqrt(rounds)
    assert abs(np.mean(emitted) - want) < 4 * se, (np.mean(emitted), want, se)
    assert expected_tokens_per_pass(1.0, k) == k + 1 and expected_tokens_per_pass(0.0, k) == 1
    assert expected_speedup(alpha, k, 0.0) == pytest.approx(want)
    assert modelled_speedup(alpha, k, 1.0, 0.0) == pytest.approx(want)


def test_a_damped_target_agrees_more_with_its_layer_skip_draft():
    base = decoder_init(vocab=64, d_model=32, n_heads=4, n_layers=4, d_ff=64, max_len=128, seed=0)
    prompt = np.arange(6)
    acc = []
    for eps in (0.0, 0.1, 1.0):
        target = damp_upper_blocks(base, 1, eps)
        got, st = speculative_generate(target, draft_by_layer_skip(target, 1), prompt, 60, k=4, greedy=True)
        assert got == generate(target, [prompt], 60)[0]
        acc.append(st.acceptance)
    assert acc[0] == 1.0 and acc[0] >= acc[1] > acc[2]


@pytest.mark.slow
def test_transformers_assisted_generation_equals_ours_and_the_targets_greedy_tokens():
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from scaleoutai.serving.efficiency import to_gpt2

    target = damp_upper_blocks(decoder_init(vocab=64, d_model=32, n_heads=4, n_layers=3, d_ff=64, max_len=64,
                                            seed=4), 1, 0.2)
    draft = draft_by_layer_skip(target, 1)
    prompt = np.array([5, 9, 2, 7])
    ours, _ = speculative_generate(target, draft, prompt, 24, k=3, greedy=True)
    ids = torch.from_numpy(prompt[None])
    hf_t, hf_d = to_gpt2(target), to_gpt2(draft)
    out = hf_t.generate(ids, attention_mask=torch.ones_like(ids), assistant_model=hf_d, do_sample=False,
                        max_new_tokens=24, min_new_tokens=24)
    assert out[0, len(prompt):].tolist() == ours == generate(target, [prompt], 24)[0]


def test_bad_arguments_are_clear_errors():
    a = decoder_init(vocab=10, max_len=16)
    with pytest.raises(ValueError, match="share a vocabulary"):
        speculative_generate(a, decoder_init(vocab=11, max_len=16), np.array([1]), 2)
    with pytest.raises(ValueError, match="exceeds max_len"):
        speculative_generate(a, a, np.array([1, 2]), 12, k=4)
    with pytest.raises(ValueError, match="n_layers must lie"):
        draft_by_layer_skip(a, 3)
