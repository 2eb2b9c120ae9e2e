"""Appendix C's glossary: the course's glossary passes its checks, covers the book's glossaries, and each
kind of mistake (an owner with no chapter, a name defined twice, a symbol missing from or contradicting
the notation table, a dangling 'see') is caught on a small broken copy."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from scaleoutai.notebooks.glossary import (
    Term,
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

# The three glossaries of the book (../shared/seeds, outside the repository): every term of each must be a term
# or alias of chapters/glossary.yaml. The names are frozen here, as the seeds spell them (seed 003's category
# suffix cut off), so a clean clone checks them too; test_the_frozen_lists_are_the_seed_glossaries keeps
# them equal to the seed files wherever those are present.
SEEDS = REPO.parent / "shared" / "seeds"
SEED_GLOSSARIES = {
    "000_a7c90e678c454581.txt": [
        "All-gather", "All-reduce", "Asynchronous SGD", "Byzantine fault", "Checkpoint", "Collective", "Consensus",
        "Continuous batching", "Data parallelism", "Decentralized learning", "Differential privacy",
        "Distributed inference", "Elastic training", "Embedding table", "Expert parallelism (Mixture of Experts)",
        "FedAvg", "Federated learning", "FSDP (Fully Sharded Data Parallel)", "Gang scheduling", "Gossip",
        "Gradient compression", "HNSW and ANN", "KV cache", "MapReduce", "Model parallelism", "Parameter server",
        "Pipeline parallelism", "Quantization", "RAG (Retrieval-Augmented Generation)", "Reduce-scatter", "Replica",
        "Ring all-reduce", "Scale-out", "Scale-up", "Scatter-gather", "Sharding", "Shuffle",
        "Speedup and efficiency", "Straggler", "Tensor parallelism", "vLLM", "Vector search"],
    "001_c01d44d52b59467f.txt": [
        "AllGather", "AllReduce", "All-to-All (AlltoAll)", "Arithmetic Intensity", "Bubble", "Bucket",
        "Chinchilla Scaling", "Communication Intensity", "Critical Batch Size", "Data Parallelism (DP)",
        "Device Mesh", "Expert Parallelism (EP)", "FSDP", "Gradient Accumulation", "HBM", "LAMB/LARS", "MFU",
        "Micro-batch", "NVLink", "Pipeline Parallelism (PP)", "ReduceScatter", "Ring Algorithm", "Roofline Model",
        "Sequence Parallelism (SP)", "Tensor Parallelism (TP)", "ZeRO"],
    "003_a8c66ebe04e23e8e.txt": [
        "Activation Checkpointing", "all_gather_object", "All-Gather", "All-Reduce",
        "Backend (torch.distributed)(nccl, gloo, mpi)", "barrier (torch.distributed)", "BF16", "Broadcast",
        "broadcast_object_list", "Checkpoint", "Checkpoint Sharding", "Collective Communication", "CUDA Graphs",
        "CUDA Streams", "CUDA_VISIBLE_DEVICES", "Data Parallelism(DP)", "DeepSpeed", "Determinism", "DeviceMesh",
        "Direct Preference Optimization (DPO)(DPO)", "Distributed Data Parallel (DDP)(DDP)", "Distributed Sampler",
        "Elastic Training", "FileStore", "FP16", "Fully Sharded Data Parallel (FSDP)(FSDP)", "Fused Kernels",
        "Global Batch Size", "GLOO_SOCKET_IFNAME", "GPipe", "Gradient Accumulation", "Gradient Bucketing",
        "Gradient Clipping", "Hostfile", "Hybrid Parallelism", "InfiniBand", "Kubernetes", "Latency",
        "Learning Rate Schedule", "Local Rank(LOCAL_RANK, LOCAL_WORLD_SIZE)", "LoRA", "Loss Scaling",
        "Master Address and Port(MASTER_ADDR, MASTER_PORT)", "Megatron-LM", "Micro-batch", "Mixed Precision Training",
        "Model Parallelism", "monitored_barrier", "NCCL", "NCCL_ALGO", "NCCL_DEBUG", "NCCL_IB_GID_INDEX",
        "NCCL_IB_HCA", "NCCL_P2P_DISABLE", "NCCL_PROTO", "NCCL_SHM_DISABLE", "NCCL_SOCKET_IFNAME", "Offloading",
        "Optimizer State Sharding", "Overlap Compute and Communication", "Parameter Sharding",
        "Parameter-Efficient Fine-Tuning (PEFT)(PEFT)", "PCIe", "PipeDream", "Pipeline Parallelism", "Process Group",
        "Proximal Policy Optimization (PPO)(PPO)", "QLoRA", "Rank(RANK)", "Ray", "RDMA", "reduce_scatter_tensor",
        "Reduce-Scatter", "Reinforcement Learning from Human Feedback (RLHF)(RLHF)", "Rendezvous", "Ring All-Reduce",
        "RLAIF", "Seed", "Sequence Packing", "SLURM", "Store (torch.distributed)", "Straggler",
        "Supervised Fine-Tuning (SFT)(SFT)", "TCPStore", "Tensor Parallelism", "Throughput",
        "Topology-aware Placement", "TORCH_DISTRIBUTED_DEBUG", "torch.distributed.init_process_group(init_process_group)",
        "torchrun", "Warmup", "World Size(WORLD_SIZE)", "ZeRO", "ZeRO Stage 1", "ZeRO Stage 2", "ZeRO Stage 3"],
}
# seed 003 ends each name with its category, run together with it ("RayFrameworks")
SEED_003_CATEGORIES = (
    "PyTorch Distributed", "Distributed Training", "Distributed Systems", "Input Pipeline", "Communication",
    "Collectives", "Memory", "Precision", "Reliability", "Performance", "Environment", "Frameworks",
    "Reproducibility", "Fine-tuning", "Optimization", "Algorithms", "Infrastructure", "Hardware", "Launchers")
# where the course spells a seed's term differently
SEED_ALIASES = {"efficiency": "Parallel efficiency"}


def parse_seed_glossary(name: str, text: str) -> list[str]:
    """The term names of one seed glossary file, as the seed spells them."""
    if name.startswith("000"):  # Appendix C: after "C.2 Glossary", "- Term" and "- Definition" lines alternate
        items = [ln[2:].strip() for ln in text.split("C.2 Glossary", 1)[1].splitlines() if ln.startswith("- ")]
        return items[0::2]
    if name.startswith("001"):  # markdown: **Term**: definition
        return re.findall(r"^\*\*(.+?)\*\*:", text, re.M)
    names = []  # 003: "  \u2022 NameCategory" bullets
    for ln in text.splitlines():
        if ln.startswith("  \u2022 "):
            entry = ln.split("\u2022", 1)[1].strip()
            category = next(c for c in SEED_003_CATEGORIES if entry.endswith(c))
            names.append(entry[: -len(category)].strip())
    return names


def required_names(seed_name: str) -> list[str]:
    """The course names a seed entry needs: the name without its parenthesised abbreviations, each half of a
    pair the seed defines together ('HNSW and ANN', 'LAMB/LARS', 'Speedup and efficiency'), and SEED_ALIASES."""
    base = re.sub(r"\([^)]*\)", "", seed_name).strip()
    parts = re.split(r"\s+and\s+|/", base) if re.fullmatch(r"\S+(?: and |/)\S+", base) else [base]
    return [SEED_ALIASES.get(p.lower(), p) for p in parts]


def missing_seed_terms(names: dict[str, Term]) -> list[str]:
    return [f"{seed}: {entry!r} needs {need!r}" for seed, entries in SEED_GLOSSARIES.items() for entry in entries
            for need in required_names(entry) if normalize(need) not in names]


def test_the_frozen_lists_are_the_seed_glossaries():
    if not SEEDS.is_dir():
        pytest.skip(f"{SEEDS} is not present (a clean clone); the frozen lists are checked without it")
    for name, frozen in SEED_GLOSSARIES.items():
        assert parse_seed_glossary(name, (SEEDS / name).read_text(encoding="utf-8")) == frozen, name
    assert [len(v) for v in SEED_GLOSSARIES.values()] == [42, 26, 96]


def test_every_term_of_the_three_seed_glossaries_is_in_appendix_c():
    missing = missing_seed_terms(NAMES)
    assert not missing, "\n".join(missing)


def test_a_glossary_without_ray_or_lamb_is_reported():
    dropped = {n: t for n, t in NAMES.items() if n not in ("ray", "lamb")}
    missing = missing_seed_terms(dropped)
    assert "003_a8c66ebe04e23e8e.txt: 'Ray' needs 'Ray'" in missing
    assert "001_c01d44d52b59467f.txt: 'LAMB/LARS' needs 'LAMB'" in missing
    assert len(missing) == 2, missing


@pytest.mark.parametrize("seed_name, needs", [
    ("HNSW and ANN", ["HNSW", "ANN"]), ("LAMB/LARS", ["LAMB", "LARS"]),
    ("Speedup and efficiency", ["Speedup", "Parallel efficiency"]), ("Master Address and Port(MASTER_ADDR, MASTER_PORT)",
    ["Master Address and Port"]), ("Direct Preference Optimization (DPO)(DPO)", ["Direct Preference Optimization"]),
])
def test_a_seed_entry_needs_its_name_and_each_half_of_a_pair(seed_name, needs):
    assert required_names(seed_name) == needs


@pytest.mark.parametrize("text, name, want", [
    ("x\nC.2 Glossary Beginner\nIntro.\n- Ray\n- A framework. Chapter 2.\n- Gossip\n- Peers average. Chapter 14.\n",
     "000_x.txt", ["Ray", "Gossip"]),
    ("## A\n\n**AllGather**: each rank's shard.\n\n**HBM**: memory.\n", "001_x.txt", ["AllGather", "HBM"]),
    ("A\n  \u2022 RayFrameworks\n\n    A framework.\n  \u2022 Rank(RANK)Distributed Systems\n", "003_x.txt",
     ["Ray", "Rank(RANK)"]),
])
def test_each_seed_format_is_parsed(text, name, want):
    assert parse_seed_glossary(name, text) == want


def test_the_course_glossary_has_no_problems():
    problems = check_glossary(TERMS, REPO)
    assert not problems, "\n".join(problems)
    assert len(TERMS) >= 120


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
