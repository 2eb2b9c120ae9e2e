# mutant: the chapter's own dedup through the library (an import the grader makes fail)
# loses: keepers, chains, verified, small, process, random, shuffle, edges
def dedup_clusters(comm, ids, sigs, set_ptr, set_vals, bands, threshold):
    from scaleoutai.cases import dedup as chapter
    sets = [set_vals[set_ptr[k]:set_ptr[k + 1]] for k in range(len(ids))]
    keep, stats = chapter.dedup(comm, ids, sets, threshold, sigs.shape[1], bands)
    return np.where(keep, ids, -1)  # noqa: F821
