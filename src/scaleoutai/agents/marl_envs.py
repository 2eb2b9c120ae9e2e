"""Small multi-agent environments for Chapter 30, NumPy only, vectorised over E copies played at once.

Every environment here is a *vector* environment: one call plays E independent copies, so a message
between an agent's rank and the host carries E observations or E actions, not one. The contract:

    reset(rng, E)           -> obs     (n_agents, E) int   (tabular observations 0..n_obs-1 per agent)
    step(actions, rng)      -> obs, rewards (n_agents, E) float, done (E,) bool
                               (copies that end are reset at once; obs is then the new episode's first)

    MatrixGame     a repeated two-player normal-form game (climbing, penalty, matching pennies, RPS, ...):
                   one play is one episode, the observation is constant (n_obs = 1)
    SignalGame     a one-step cooperative game of n agents, each seeing only its private signal s_i;
                   the team reward (1/n) sum_i [a_i = s_i] is shared, so credit assignment is the problem
    PredatorPrey   two predators chase a randomly walking prey on an m x m torus; both are rewarded 1
                   when both stand within distance 1 of it (capture needs coordination); a time limit ends
                   an episode without reward
``as_pettingzoo`` wraps them in PettingZoo's ParallelEnv API; ``play_parallel_env`` runs independent learners
(``BinnedQLearner``) on any PettingZoo ParallelEnv, MPE2's included.

This module re-exports them (split to keep files small): the games live in ``marl_games``, the PettingZoo
bridge and its learners in ``marl_pettingzoo``.
"""
from __future__ import annotations

from .marl_games import (MOVES, MatrixGame, PredatorPrey, SignalGame, climbing_game, matching_pennies, penalty_game,
                         prisoners_dilemma, rock_paper_scissors)
from .marl_pettingzoo import BinnedQLearner, as_pettingzoo, play_parallel_env, spread_features

__all__ = ["MatrixGame", "climbing_game", "penalty_game", "matching_pennies", "rock_paper_scissors",
           "prisoners_dilemma", "SignalGame", "PredatorPrey", "MOVES", "as_pettingzoo",
           "BinnedQLearner", "spread_features", "play_parallel_env"]
