"""Every dataset of the course, generated from a seed: nothing is downloaded at run time (Appendix D).

A shared layer (NumPy only): parts import it, it imports nothing of ours but ``errors``. Each generator
is a pure function of its arguments, so rank r of K can regenerate the whole set and keep its shard,
or the driver can generate once and scatter; both give the same bytes. Chapters load their data only
through this package (``tests/test_datasets_catalogue.py``); ``catalogue.CATALOGUE`` lists every dataset
with its size, seed, loader and the chapters that use it.

    tabular    linear_regression, classification, blobs, power_law_graph, community_graph
    graphs     ring_graph, grid_graph, complete_graph, random_regular_graph, random_geometric_graph,
               erdos_renyi_graph, from_edges, check_neighbours, is_connected
    corpora    zipf_lines, make_corpus (Corpus, RELATIONS)
    records    make_records, low_rank_ratings, vector_data
    streams    generate_events (Events), drifting_regression, shifted_stream
    traces     poisson_arrivals, service_times, request_trace (Request), job_trace (JobTrace), markov_link
    clinical   clinical_sites, clinical_profiles, clinical_split, true_logit (+ FEATURES, UNITS, ...) (Ch37)
    text       web_corpus (WebCorpus, FACT_TEMPLATES) (Ch36)
    recsys     recsys_interactions (Interactions) (Ch38)
    arenas     arena (Arena), start_positions, formation_shape, coarsen (Ch39)
    catalogue  CATALOGUE, INSTANCES, SHIPPED, BENCHMARKS, load, measure (Appendix D's tables)
    audit      check_chapter: a chapter loads data only through this package (the test calls it)
"""
from __future__ import annotations

from .arenas import Arena, arena, coarsen, formation_shape, start_positions
from .clinical import (COEF, FEATURES, INTERCEPT, REFERENCE, UNITS, clinical_profiles, clinical_sites, clinical_split,
                       true_logit)
from .corpora import RELATIONS, Corpus, make_corpus, zipf_lines
from .graphs import (Neighbours, check_neighbours, complete_graph, erdos_renyi_graph, from_edges, grid_graph,
                     is_connected, random_geometric_graph, random_regular_graph, ring_graph)
from .recsys import Interactions, recsys_interactions
from .records import low_rank_ratings, make_records, vector_data
from .streams import Events, drifting_regression, generate_events, shifted_stream
from .text import FACT_TEMPLATES, WebCorpus, web_corpus
from .tabular import blobs, classification, community_graph, linear_regression, power_law_graph
from .traces import JobTrace, Request, job_trace, markov_link, poisson_arrivals, request_trace, service_times

__all__ = ["linear_regression", "classification", "blobs", "power_law_graph", "community_graph", "Neighbours",
           "from_edges", "ring_graph", "grid_graph", "complete_graph", "is_connected", "check_neighbours",
           "random_regular_graph", "random_geometric_graph", "erdos_renyi_graph",
           "zipf_lines", "make_corpus", "Corpus", "RELATIONS", "make_records", "low_rank_ratings", "vector_data",
           "generate_events", "Events", "drifting_regression", "shifted_stream", "poisson_arrivals",
           "service_times", "request_trace", "Request", "job_trace", "JobTrace", "markov_link",
           "clinical_sites", "clinical_profiles", "clinical_split", "true_logit", "FEATURES", "UNITS", "REFERENCE",
           "COEF", "INTERCEPT", "recsys_interactions", "Interactions", "web_corpus", "WebCorpus", "FACT_TEMPLATES", "Arena", "arena", "start_positions", "formation_shape", "coarsen"]
