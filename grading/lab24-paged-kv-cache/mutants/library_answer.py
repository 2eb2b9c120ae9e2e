# mutant: takes the allocator from the course library through an import path a grep does not see
# loses: tokens, refcounts, no_leak, copy_on_write, sharing, out_of_blocks, decoder
import importlib


class BlockAllocator:
    def __init__(self, *args):
        self._impl = importlib.import_module("scaleoutai.serving." + "paged_cache").BlockAllocator(*args)

    def num_free(self):
        return self._impl.num_free

    def refcount(self, block):
        return int(self._impl.refcount[block])

    def __getattr__(self, name):
        return getattr(self._impl, name)
