"""Every dataset of the course, generated from a seed: nothing is downloaded at run time (Appendix D).

A shared layer (NumPy only): parts import it, it imports nothing of ours but ``errors``. Each generator
is a pure function of its arguments, so rank r of K can regenerate the whole set and keep its shard,
or the driver can generate once and scatter; both give the same bytes. Chapters load their data only
through this package (``tests/test_datasets_catalogue.py``); ``CATALOGUE`` lists every dataset with
its size, seed, loader and the chapters that use it.

    tabular    linear_regression, classification, blobs, power_law_graph, community_graph
    graphs     ring_graph, grid_graph, complete_graph, random_regular_graph, random_geometric_graph,
               erdos_renyi_graph, from_edges, check_neighbours, is_connected
"""
from __future__ import annotations

from .graphs import (Neighbours, check_neighbours, complete_graph, erdos_renyi_graph, from_edges, grid_graph,
                     is_connected, random_geometric_graph, random_regular_graph, ring_graph)
from .tabular import blobs, classification, community_graph, linear_regression, power_law_graph

__all__ = ["linear_regression", "classification", "blobs", "power_law_graph", "community_graph", "Neighbours",
           "from_edges", "ring_graph", "grid_graph", "complete_graph", "is_connected", "check_neighbours",
           "random_regular_graph", "random_geometric_graph", "erdos_renyi_graph"]
