"""Public tests for lab 24: run them from the notebook's last cell. The grader runs more, hidden ones."""


def run_public_tests(BlockAllocator, OutOfBlocks):
    a = BlockAllocator(4, 2)
    a.allocate("x", 3)
    assert len(a.table("x")) == 2 and a.num_free() == 2, "3 tokens in blocks of 2 take 2 blocks"
    blk, off, src = a.append_slot("x")
    assert (blk, off, src) == (a.table("x")[1], 1, None), "token 3 goes to slot 1 of the second block"
    blk, off, src = a.append_slot("x")
    assert off == 0 and len(a.table("x")) == 3 and a.num_free() == 1, "token 4 starts a third block"
    print("ok: allocate and append_slot")

    a.fork("x", "y")
    assert a.table("y") == a.table("x") and a.num_free() == 1, "a fork shares every block and takes none"
    assert all(a.refcount(b) == 2 for b in a.table("x"))
    blk, off, src = a.append_slot("y")
    assert src == a.table("x")[2] and blk != src and off == 1, "the shared half-full block is copied first"
    assert a.refcount(src) == 1 and a.num_free() == 0
    print("ok: fork and copy-on-write")

    before = (a.table("x"), a.table("y"), a.num_free())
    try:
        a.append_slot("x")  # x's last block is now private and half full: no block needed
        a.append_slot("x")  # full: a new block is needed and none is free
        raise AssertionError("append_slot should raise OutOfBlocks when no block is free")
    except OutOfBlocks:
        pass
    assert a.table("y") == before[1] and a.num_free() == 0, "a failed append changes nothing"
    a.free("x")
    assert a.num_free() == 1 and all(a.refcount(b) == 1 for b in a.table("y")), \
        "freeing x returns only the blocks y does not hold"
    a.free("y")
    assert a.num_free() == 4
    print("ok: out of blocks and free")
    print("public tests passed; the grader also runs random traces and the decoder over your allocator")
