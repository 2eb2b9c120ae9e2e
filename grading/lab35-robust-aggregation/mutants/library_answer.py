# mutant: the course library's rules through an import path a grep misses
# loses: median, trimmed_mean, krum, multi_krum, limits, server, traffic, correct_process
import importlib


def _lib():
    return importlib.import_module("scaleoutai." + "in" + "fra.robust_agg")


def coordinate_median(vectors):
    return _lib().coordinate_median(vectors)


def trimmed_mean(vectors, f):
    return _lib().trimmed_mean(vectors, f)


def krum(vectors, f, m=1):
    return _lib().multi_krum(vectors, f, m)
