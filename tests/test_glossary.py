"""Appendix C's glossary: the course's glossary passes its checks, covers the book's glossaries, and each
kind of mistake (an owner with no chapter, a name defined twice, a symbol missing from or contradicting
the notation table, a dangling 'see') is caught on a small broken copy."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from scaleoutai.notebooks.glossary import (
    chapter_folders,
    chapter_titles,
    check_glossary,
    load_glossary,
    normalize,
    notation_table,
    render_markdown,
    render_notation,
)

REPO = Path(__file__).resolve().parents[1]
GLOSSARY = REPO / "chapters" / "glossary.yaml"
TERMS = load_glossary(GLOSSARY)
NAMES = {normalize(n): t for t in TERMS for n in (t.term, *t.aliases)}

# The terms of the book's two glossaries (seeds 000 and 001) and those of seed 003 the chapters touch.
SEED_TERMS = [
    "All-gather", "All-reduce", "All-to-all", "Arithmetic intensity", "Asynchronous SGD", "Bubble", "Bucket",
    "Byzantine fault", "Checkpoint", "Chinchilla scaling", "Collective", "Communication intensity", "Consensus",
    "Continuous batching", "Critical batch size", "Data parallelism", "Decentralized learning", "Device mesh",
    "Differential privacy", "Distributed inference", "Elastic training", "Embedding table", "Expert parallelism",
    "FedAvg", "Federated learning", "FSDP", "Gang scheduling", "Gossip", "Gradient accumulation",
    "Gradient compression", "HNSW", "ANN", "KV cache", "LAMB", "LARS", "MapReduce", "MFU", "Micro-batch",
    "Model parallelism", "Parameter server", "Pipeline parallelism", "Quantization", "RAG", "Reduce-scatter",
    "Replica", "Ring all-reduce", "Roofline model", "Scale-out", "Scale-up", "Scatter-gather", "Sharding",
    "Shuffle", "Speedup", "Parallel efficiency", "Straggler", "Sequence parallelism", "Tensor parallelism",
    "vLLM", "Vector search", "ZeRO", "ZeRO stage 1", "ZeRO stage 2", "ZeRO stage 3",
    # seed 003, where a chapter or Appendix B uses the term
    "Activation checkpointing", "Backend", "Barrier", "BF16", "FP16", "Broadcast", "DDP", "Distributed sampler",
    "Determinism", "Gloo", "NCCL", "GPipe", "Global batch size", "Gradient bucketing", "Hybrid parallelism",
    "Latency", "Learning rate schedule", "Local rank", "Loss scaling", "Master address and port", "Megatron-LM",
    "Mixed precision training", "Offloading", "Optimizer state sharding",
    "Parameter sharding", "Process group", "Rank", "Rendezvous", "Seed", "Slurm", "Store", "TCPStore",
    "Throughput", "Topology-aware placement", "torchrun", "Warmup", "World size", "NVLink", "PCIe",
]


def test_the_course_glossary_has_no_problems():
    problems = check_glossary(TERMS, REPO)
    assert not problems, "\n".join(problems)
    assert len(TERMS) >= 120


@pytest.mark.parametrize("name", SEED_TERMS)
def test_every_seed_glossary_term_the_course_uses_is_defined(name):
    assert normalize(name) in NAMES, f"{name} is not a term or alias of chapters/glossary.yaml"


@pytest.mark.parametrize("name, owner", [("All-reduce", 4), ("Tensor parallelism", 16), ("Byzantine fault", 35),
                                         ("FedAvg", 14), ("Shuffle", 6), ("Speedup", 3), ("Paged KV cache", 24),
                                         ("Gang scheduling", 33), ("CFR", 28), ("Rendezvous", "B")])
def test_terms_are_owned_by_the_chapter_that_develops_them(name, owner):
    assert NAMES[normalize(name)].owner == owner


def test_only_chapters_36_to_40_are_planned_and_the_rest_exist():
    have = chapter_folders(REPO)
    for t in TERMS:
        assert (t.owner in have) != t.planned, t.term
        assert not t.planned or 36 <= t.owner <= 40


def test_symbols_name_their_notation_entry_and_every_first_use_chapter_exists():
    table = notation_table(REPO / "chapters" / "notation.yaml")
    linked = {t.symbol for t in TERMS if t.symbol}
    assert {"K", "B", "b", "P", "S_p", "E_p", "\\eta", "f", "\\varepsilon"} <= linked
    have = chapter_folders(REPO)
    for name, entry in table.items():
        number = int(re.fullmatch(r"Ch (\d+)", entry["first_use"])[1])
        assert number in have, f"{name}: first use Chapter {number} has no folder"


# ---------------------------------------------------------------- each mistake on a small broken copy

NOTATION = """symbols:
  K: {meaning: number of workers or devices cooperating on one job, first_use: Ch 1, not: [parameter, byte]}
  P: {meaning: number of model parameters, first_use: Ch 4, not: [device, GPU, worker]}
  \\alpha: {meaning: latency per message in the alpha-beta model, first_use: Ch 4}
"""
GOOD = [
    "- {term: Worker, owner: 1, symbol: K, definition: One of the participants that share the work of a job.}",
    "- {term: All-reduce, aliases: [allreduce sum], owner: 4, see: [Worker],"
    " definition: Every rank ends with the same combined buffer of all ranks.}",
    "- {term: Alpha-beta model, owner: 4, symbol: '\\alpha', definition: A message of n bytes costs alpha plus n beta.}",
    "- {term: Two-tower model, owner: 38, planned: true, definition: Separate user and item encoders compared by a dot product.}",
    "- {term: Launcher, owner: B, definition: The program that starts one process per rank of the job.}",
]


def small_course(tmp_path: Path, extra: list[str]) -> Path:
    for folder in ("01-why", "04-comm", "appendix-b-lab"):
        (tmp_path / "chapters" / folder).mkdir(parents=True)
    (tmp_path / "chapters" / "04-comm" / "04-comm.py").write_text("# %% [markdown]\n# # Chapter 4. Communication\n")
    (tmp_path / "chapters" / "notation.yaml").write_text(NOTATION)
    (tmp_path / "chapters" / "glossary.yaml").write_text("terms:\n" + "\n".join(GOOD + extra) + "\n")
    return tmp_path


def test_the_small_copy_is_clean_and_renders_by_chapter(tmp_path):
    root = small_course(tmp_path, [])
    terms = load_glossary(root / "chapters" / "glossary.yaml")
    assert check_glossary(terms, root) == []
    text = render_markdown(terms, chapter_titles(root))
    heads = [ln for ln in text.splitlines() if ln.startswith("### ")]
    assert heads == ["### Chapter 1. 01-why", "### Chapter 4. Communication", "### Chapter 38 (planned)",
                     "### Appendix B. appendix-b-lab"]
    assert "- **Worker** (symbol $K$): One of the participants" in text and "*See:* Worker." in text
    assert render_notation(notation_table(root / "chapters" / "notation.yaml")).splitlines()[2].startswith("| $K$ |")


@pytest.mark.parametrize("entry, message", [
    ("- {term: Sharding, owner: 8, definition: Cutting data into disjoint pieces one per worker.}",
     "'Sharding': owner chapter 8 does not exist (no chapters/08-* folder)"),
    ("- {term: Replay, owner: 20, planned: true, definition: Keeping old experience to train on it again.}",
     "'Replay': 'planned: true' is only for chapters 36-40, and chapter 20 is not one of them"),
    ("- {term: Ring, owner: 4, planned: true, definition: Ranks arranged in a cycle pass chunks onward.}",
     "'Ring': chapter 4 exists now; remove 'planned: true'"),
    ("- {term: Datasets, owner: D, definition: Every dataset of the course with its seed and size.}",
     "'Datasets': owner appendix D does not exist (no chapters/appendix-d-* folder)"),
    ("- {term: ALL_REDUCE, owner: 4, definition: A second definition of the same collective here.}",
     "'ALL_REDUCE': 'ALL_REDUCE' is already defined by 'All-reduce'"),
    ("- {term: Reduction, aliases: [All-Reduce Sum], owner: 4, definition: Combining buffers with an operation.}",
     "'Reduction': 'All-Reduce Sum' is already defined by 'All-reduce'"),
    ("- {term: Broadcast, aliases: [broad-cast], owner: 4, definition: One root's buffer is copied to all ranks.}",
     "'Broadcast': alias 'broad-cast' only repeats the term's own name"),
    ("- {term: Learning rate, owner: 1, symbol: '\\eta', definition: The factor multiplying the gradient in an update.}",
     "'Learning rate': symbol '\\\\eta' is not in chapters/notation.yaml"),
    ("- {term: Device count, owner: 1, symbol: P, definition: How many accelerators the job runs on.}",
     "'Device count': symbol P means 'number of model parameters' in chapters/notation.yaml and never counts device"),
    ("- {term: Step size, owner: 1, symbol: '\\alpha', definition: The factor multiplying the gradient in an update.}",
     "'Step size': symbol \\alpha means 'latency per message in the alpha-beta model' in chapters/notation.yaml and "
     "does not name this term"),
    ("- {term: Gather, owner: 4, see: [Scatter], definition: Every rank sends its piece to one root.}",
     "'Gather': 'see: Scatter' names no term of the glossary"),
])
def test_each_mistake_is_one_clear_line(tmp_path, entry, message):
    root = small_course(tmp_path, [entry])
    problems = check_glossary(load_glossary(root / "chapters" / "glossary.yaml"), root)
    assert len(problems) == 1 and problems[0].startswith(message), problems


@pytest.mark.parametrize("entry, message", [
    ("- {term: X, owner: Z, definition: A definition that is long enough to count.}", "'owner' must be a chapter number"),
    ("- {term: X, owner: 1, definition: too short}", "needs a 'definition'"),
    ("- {term: X, owner: 1, colour: red, definition: A definition that is long enough to count.}", "unknown field"),
    ("- {owner: 1, definition: A definition that is long enough to count.}", "needs a 'term: NAME'"),
])
def test_a_malformed_entry_is_one_value_error(tmp_path, entry, message):
    root = small_course(tmp_path, [entry])
    with pytest.raises(ValueError, match=re.escape(message)) as info:
        load_glossary(root / "chapters" / "glossary.yaml")
    assert "\n" not in str(info.value)
