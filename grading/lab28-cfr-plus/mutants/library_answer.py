# mutant: the chapter's library through an import path a grep does not see (its regret matching for rm_plus)
# loses: tables, regret_floor, converges, process, random, messages
import importlib


def rm_plus(regret):
    c = importlib.import_module("scaleoutai.agents." + "c" + "fr")
    return c._regret_matching(np.asarray(regret).reshape(-1, 2)).reshape(np.shape(regret))  # noqa: F821
