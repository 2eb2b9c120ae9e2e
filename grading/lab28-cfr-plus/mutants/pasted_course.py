# mutant: the chapter's vanilla CFR (cfr._regret_matching, cfr._traverse's regret and reach-weighted policy
# sums, cfr.cfr_iteration's alternation) adapted by hand into the lab's sharded protocol: regrets never floored,
# every iteration's policy weighted 1 in the average
# loses: tables, regret_floor, converges, process, random, messages
# says: CFR+
# score-at-most: 50
def _regret_matching(regret):
    pos = np.maximum(regret, 0.0)  # noqa: F821
    total = pos.sum(axis=-1, keepdims=True)
    return np.where(total > 0, pos / np.where(total > 0, total, 1.0), 0.5).astype(regret.dtype)  # noqa: F821


def _vanilla_update(regret, cum, sigma, w, player):
    value = {z: w[:, col] for col, z in enumerate(TERM)}  # noqa: F821
    for h in ("pb", "p", "b", ""):
        hi, child = HIST.index(h), [value[h + "p"], value[h + "b"]]  # noqa: F821
        if len(h) % 2 == player:
            v = sigma[:, hi, 0] * child[0] + sigma[:, hi, 1] * child[1]
            for a in range(2):
                regret[:, hi, a] += child[a] - v
        else:
            v = child[0] + child[1]
        value[h] = v
    reach = {"": 1.0, "pb": sigma[:, 0, 0]} if player == 0 else {"p": 1.0, "b": 1.0}
    for h, r in reach.items():
        hi = HIST.index(h)  # noqa: F821
        cum[:, hi, :] += np.asarray(r, dtype=cum.dtype)[..., None] * sigma[:, hi, :]  # noqa: F821


def cfr_plus(comm, n_cards, lo, regret, strat, t0, iterations):
    regret, cum = np.array(regret, copy=True), np.array(strat, copy=True)  # noqa: F821
    cards = np.arange(lo, lo + regret.shape[0])  # noqa: F821
    policy = _regret_matching(regret)
    for _ in range(iterations):
        for player in (0, 1):
            opp = exchange_reach(comm, terminal_reach(policy, 1 - player))  # noqa: F821
            _vanilla_update(regret, cum, policy, terminal_values(opp, cards, player), player)  # noqa: F821
            policy = _regret_matching(regret)
    return regret, cum
