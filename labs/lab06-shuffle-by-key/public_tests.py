"""Public tests for lab 6: run them from the notebook's last cell. The grader runs more, hidden ones."""
from collections import Counter

from scaleoutai import cluster
from scaleoutai.grading.public import check


def _worker(comm, splits, combine, s, sort_shuffle):
    return sort_shuffle(comm, splits[comm.rank], combine, s)


def _check(order, sort_shuffle, splits, combine, s, what):
    K = len(splits)
    res = cluster.run(_worker, K, args=(splits, combine, s, sort_shuffle), timeout=60, quiet=True)
    flat = []
    for r, mine in enumerate(res.values):
        assert isinstance(mine, list), f"{what}: rank {r} returned {type(mine).__name__}, not a list of pairs"
        keys = [order(k) for k, _ in mine]
        assert keys == sorted(keys), f"{what}: rank {r}'s pairs are not sorted by order(key)"
        flat += [tuple(p) for p in mine]
    keys = [order(k) for k, _ in flat]
    assert keys == sorted(keys), f"{what}: ranks 0..K-1 do not hold increasing ranges of keys"
    pairs = [p for split in splits for p in split]
    if combine is None:
        assert Counter(flat) == Counter(pairs), f"{what}: pairs were lost or duplicated"
        N = len(pairs)
        loads = [len(m) for m in res.values]
        assert max(loads) <= N / K + 2 * N / s + 1, f"{what}: pairs per rank {loads}, above N/K + 2N/s + 1"
    else:
        totals = Counter()
        for k, v in pairs:
            totals[k] += v
        assert len(flat) == len(totals) and dict(flat) == dict(totals), f"{what}: wrong sums, or a key twice"


NOTE = ("public tests passed; the grader also checks other world sizes and skews, big ints, real processes, "
        "and the bytes each rank sends to each rank")


@check
def splitters_agree(order, choose_splitters):
    assert order(-3) < order(10) < order("10") < order("9"), "order: ints first, then strs"
    elems = [[((False, 10 * r + i), r, i) for i in range(5 * r)] for r in range(3)]
    got = cluster.run(lambda comm: choose_splitters(comm, elems[comm.rank], 4), 3, timeout=60, quiet=True).values
    assert got[0] == got[1] == got[2], "choose_splitters: the ranks disagree on the splitters"
    assert len(got[0]) == 2 and list(got[0]) == sorted(got[0]), "choose_splitters: return K-1 sorted splitters"


MIXED = [("pear", 1), (3, 2), ("apple", 3), (-7, 4), ("fig", 5), (40, 6), ("pear", 7)]


@check
def shuffle_mixed_keys(order, sort_shuffle):
    _check(order, sort_shuffle, [MIXED], None, 4, "K=1, mixed keys")
    _check(order, sort_shuffle, [MIXED[:3], MIXED[3:], []], None, 4, "K=3, mixed keys, one empty split")


@check
def shuffle_hot_key_balanced(order, sort_shuffle):
    hot = [[("hot", r * 10 + i) for i in range(12)] + [(f"k{r}{i}", i) for i in range(4)] for r in range(4)]
    _check(order, sort_shuffle, hot, None, 16, "K=4, one key holding 3/4 of the pairs")


@check
def combine_sum(order, sort_shuffle):
    _check(order, sort_shuffle, [MIXED, MIXED[::-1], MIXED[2:]], "sum", 4, "K=3, combine='sum'")
