"""The centralised critic of COMA and its counterfactual advantage (Chapter 30, Section 4).

    A_i = Q(s, a) - sum_b pi_i(b | o_i) Q(s, (a_-i, b))      (Foerster et al. 2018)

compares the joint action's value with agent i's expected value when only agent i's action is resampled
from its own policy, so agent i gets credit for its own choice only.
"""
from __future__ import annotations

import numpy as np

__all__ = ["Critic", "counterfactual_advantages"]


class Critic:
    """Tabular centralised critic Q(s, a) of a one-step game over the joint observation s and the joint
    action a of n agents; each visited cell moves ``lr`` of the way to the mean reward it received.
    It has m^n A^n cells: exact for any game, but only for a few agents (COMA itself uses a network)."""

    def __init__(self, n_agents: int, n_obs: int, n_actions: int, lr: float = 0.5) -> None:
        if n_obs ** n_agents * n_actions ** n_agents > 5_000_000:
            raise ValueError("the joint critic table would exceed 5 M cells: use fewer agents, signals or actions")
        self.n, self.m, self.A, self.lr = n_agents, n_obs, n_actions, float(lr)
        self.Q = np.zeros((n_obs ** n_agents, n_actions ** n_agents))
        self.pa = n_actions ** np.arange(n_agents)   # place value of agent i's action in the joint index

    def index(self, obs: np.ndarray, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return (self.m ** np.arange(self.n)) @ obs, self.pa @ actions

    def learn(self, obs: np.ndarray, actions: np.ndarray, r: np.ndarray) -> None:
        s, a = self.index(obs, actions)
        cell = s * self.Q.shape[1] + a
        count = np.bincount(cell, minlength=self.Q.size)
        err = np.bincount(cell, weights=r - self.Q.ravel()[cell], minlength=self.Q.size)
        seen = count > 0
        self.Q.ravel()[seen] += self.lr * err[seen] / count[seen]


def counterfactual_advantages(critic: Critic, obs: np.ndarray, actions: np.ndarray, probs: np.ndarray
                              ) -> np.ndarray:
    """A_i = Q(s, a) - sum_b pi_i(b | o_i) Q(s, (a_-i, b)) for every agent i and copy e: (n, E)."""
    s, a = critic.index(obs, actions)
    q = critic.Q[s, a]
    out = np.empty(actions.shape)
    for i in range(critic.n):
        base = a - actions[i] * critic.pa[i]
        alt = critic.Q[s[:, None], base[:, None] + np.arange(critic.A)[None] * critic.pa[i]]  # (E, A)
        out[i] = q - (probs[i] * alt).sum(axis=1)
    return out
