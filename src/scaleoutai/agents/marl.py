"""Multi-agent reinforcement learning with every agent on a rank (Chapter 30).

Pattern: rank 0 hosts the environment (E copies at once, ``marl_envs``); agents 0..n-1 live on ranks in
contiguous blocks (``collectives.block_bounds``, so K > n leaves ranks idle and K = 1 is one machine). Each
step the host sends rank r the observations of its agents, rank r answers with their actions, and the host
steps the environment. A rank therefore always knows whom it waits for: the host, or (on the host) each
agent rank in turn. Every ``train_*`` equals its ``reference_*`` loop bit for bit for a fixed seed: each
agent draws from its own generator (seed, 1, i), the environment from (seed, 0), and messages carry exact
float64 copies.

    independent Q-learning   each agent learns Q_i(o_i, a_i) as if the others were part of the environment
    COMA-style CTDE          decentralised softmax actors pi_i(a_i | o_i); a centralised critic Q(s, a) on
                             the host gives agent i the counterfactual advantage
                             A_i = Q(s, a) - sum_b pi_i(b | o_i) Q(s, (a_-i, b))      (Foerster et al. 2018)
    self-play                two copies of one no-regret rule (Hedge, optimistic Hedge) on a zero-sum game

Faults: a crashed agent rank (``PeerCrashedError``) or a lost message (``MessageLostError``) makes the host
play a uniformly random *fallback* action for those agents (generator (seed, 2)); the host echoes the
executed action, so a learner never learns from an action that was replaced, and a learner whose
observation was lost skips that update.

The code lives in one module per algorithm; this module re-exports it (split to keep files small):
``marl_iql`` (Q-learners, ``epsilon``, ``evaluate``), ``marl_coma`` (actors), ``marl_critic`` (the critic and
its advantage) and ``marl_protocol`` (streams, placement, faults).
"""
from __future__ import annotations

from .marl_coma import SoftmaxActor, reference_coma, run_coma, train_coma
from .marl_critic import Critic, counterfactual_advantages
from .marl_iql import QLearner, epsilon, evaluate, reference_iql, run_iql, train_iql
# private, but the Chapter 30 solutions replay the same random streams and tie-breaking
from .marl_iql import _argmax_random_ties
from .marl_protocol import _streams

__all__ = ["QLearner", "SoftmaxActor", "Critic", "epsilon", "train_iql", "reference_iql", "run_iql",
           "counterfactual_advantages", "train_coma", "reference_coma", "run_coma", "evaluate"]
