"""Public tests for lab 24: run them from the notebook's last cell. The grader runs more, hidden ones."""

from scaleoutai.grading.public import check

NOTE = "public tests passed; the grader also checks evictions, random traces and the decoder"


def _replay(PrefixCache, upto):
    """The scenario's cache after its first ``upto`` steps (each checked by its own check)."""
    c = PrefixCache(8, 2)
    c.admit("a", [1, 2, 3])
    c.append("a", 4)
    if upto >= 2:
        c.fork("a", "b")
        c.append("b", 5)
        c.free("b")
    if upto >= 3:
        c.free("a")
        for seq, prompt in (("c", [1, 2, 3, 4, 9]), ("d", [1, 2, 3, 4]), ("e", [9, 9, 3, 4, 5])):
            c.admit(seq, prompt)
    return c


@check
def admit_and_append(PrefixCache):
    c = PrefixCache(8, 2)
    assert c.admit("a", [1, 2, 3]) == 0 and len(c.table("a")) == 2, "3 tokens in blocks of 2: 2 blocks, none reused"
    assert (c.num_free(), c.num_cached()) == (6, 0)
    blk, off, src = c.append("a", 4)
    assert (blk, off, src) == (c.table("a")[1], 1, None), "token 3 goes to slot 1 of the second block"


@check
def fork_append_free(PrefixCache):
    c = _replay(PrefixCache, 1)
    c.fork("a", "b")
    assert c.table("b") == c.table("a") and c.num_free() == 6, "a fork shares every block and takes none"
    blk, off, src = c.append("b", 5)
    assert off == 0 and src is None and len(c.table("b")) == 3, "at a block boundary a fresh block, no copy"
    c.free("b")
    assert (c.num_free(), c.num_cached()) == (6, 0), "b's own block is not full: it becomes free, not cached"


@check
def freed_prefixes_reused(PrefixCache):
    c = _replay(PrefixCache, 2)
    c.free("a")  # both of a's blocks are full, so both stay cached
    assert (c.num_free(), c.num_cached()) == (6, 2), "a freed sequence's full blocks stay cached"
    assert c.admit("c", [1, 2, 3, 4, 9]) == 4, "the next prompt with the same 4 first tokens reuses 2 blocks"
    assert c.num_cached() == 0 and all(c.refcount(x) == 1 for x in c.table("c"))
    assert c.admit("d", [1, 2, 3, 4]) == 2, "the last token of a prompt is never reused"
    assert c.admit("e", [9, 9, 3, 4, 5]) == 0, "a block's key is its whole prefix, not its own tokens"


@check
def out_of_blocks_changes_nothing(PrefixCache, OutOfBlocks):
    c = _replay(PrefixCache, 3)
    before = (c.table("c"), c.num_free(), c.num_cached())
    try:
        c.admit("f", [6, 6, 6])
        raise AssertionError("admit should raise OutOfBlocks when no block is free or cached")
    except OutOfBlocks:
        pass
    assert (c.table("c"), c.num_free(), c.num_cached()) == before, "a failed admit changes nothing"
