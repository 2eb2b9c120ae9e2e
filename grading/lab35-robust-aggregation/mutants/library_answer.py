# mutant: the course library's median through an import path a grep misses (scaleoutai.infra is unimportable in the grader)
# loses: geometric_median, weighted, limits
import importlib


def geometric_median(vectors, counts, f, nu, tol, max_iter):
    return importlib.import_module("scaleoutai." + "in" + "fra.robust_agg").aggregate(vectors, "median", f)
