# mutant: takes the allocator from the course library through an import path a grep does not see
# loses: tokens, refcounts, no_leak, copy_on_write, out_of_blocks, prefix_hits, lru_eviction, decoder
import importlib


class PrefixCache:
    def __init__(self, *args):
        self._impl = importlib.import_module("scaleoutai.serving." + "paged_cache").BlockAllocator(*args)

    def num_free(self):
        return self._impl.num_free

    def num_cached(self):
        return 0

    def refcount(self, block):
        return int(self._impl.refcount[block])

    def admit(self, seq, tokens):
        n = self._impl.share_prefix(seq, tokens)
        self._impl.append_slots(seq, len(tokens) - n)
        self._impl.publish(seq, tokens)
        return n

    def append(self, seq, token):
        return self._impl.append_slot(seq)

    def __getattr__(self, name):
        return getattr(self._impl, name)
