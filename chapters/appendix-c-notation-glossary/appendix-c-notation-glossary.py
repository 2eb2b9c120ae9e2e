# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Appendix C. Notation and glossary
#
# Forty-one chapters borrow from data systems, optimization, deep-learning frameworks, serving and game
# theory, and each of those fields arrived with its own letters and its own words. This appendix is
# where the course fixes them: one meaning per symbol (C.1, the notation table) and one definition per
# term, each linked to the chapter that develops it (C.2, the glossary). Both live in machine-readable
# files, `chapters/notation.yaml` and `chapters/glossary.yaml`, and both are checked: every chapter's
# prose against the notation, every glossary entry against the chapters that exist. The cells below
# render the two tables from those files and assert what they claim, so this appendix cannot drift
# from the course. It ends with the five course paths of the preface, read from `syllabi/`.
#
# **Prerequisites:** none beyond Chapter 1's vocabulary (workers, shards, replicas); read it as a map
# at the start and come back whenever a symbol or a word stops being obvious. Background: reading a
# YAML file and a Python dataclass.

# %% tags=["parameters"]
SCAN_CHAPTERS = 41  # smoke: 41
SHOW_GLOSSARY = True  # smoke: True

# %%
from pathlib import Path

from IPython.display import Markdown, display

from scaleoutai.notebooks import find_repo_root
from scaleoutai.notebooks import glossary, syllabi

ROOT = find_repo_root()
NOTATION = glossary.notation_table(ROOT / "chapters" / "notation.yaml")
TERMS = glossary.load_glossary(ROOT / "chapters" / "glossary.yaml")
CHAPTERS = glossary.chapter_folders(ROOT)
TITLES = glossary.chapter_titles(ROOT)
print(f"{len(NOTATION)} symbols, {len(TERMS)} terms, {len(CHAPTERS)} chapters and appendices present")

# %% [markdown]
# `SCAN_CHAPTERS` bounds how many chapter sources Section 7 reads when it asks whether each chapter
# uses the terms it owns; `SHOW_GLOSSARY` renders the whole glossary in Section 3 (turn it off for a
# short printout).
#
# ## 1. Motivation: why one letter must mean one thing
#
# The chapters stack. Data parallelism (Chapter 15), sharded and tensor parallelism (Chapter 16) and
# expert parallelism (Chapter 17) meet inside one foundation-model run (Chapter 19), and one cost
# argument there carries symbols from all three. If $K$ counted workers in one chapter and parameters
# in another, the combined argument would be wrong without looking wrong. The same holds for words: a
# reader who learned "shard" in Chapter 8 must find the same meaning in Chapter 16. So the course keeps
# exactly one table of symbols and one list of terms, and tests them.
#
# The cell below states the three conventions the rest of the course leans on most: $K$ workers with
# $b$ examples each make the global batch $B = K b$; speedup $S_p$ and efficiency $E_p = S_p / p$; and
# $P$, the number of parameters, is the payload of a gradient all-reduce.

# %%
for sym in ("K", "b", "B", "S_p", "E_p", "P", "\\alpha", "\\beta"):
    assert sym in NOTATION, f"{sym} missing from chapters/notation.yaml"
assert "workers" in NOTATION["K"]["meaning"] and "B = K b" in NOTATION["B"]["meaning"]
assert "E_p = S_p / p" in NOTATION["E_p"]["meaning"] and "parameters" in NOTATION["P"]["meaning"]
K, b = 8, 32
print(f"K = {K} workers with b = {b} examples each: B = K b = {K * b}")

# %% [markdown]
# ## 2. Core concepts: the notation table (C.1)
#
# Scalars are lower case, counts of machines or examples upper case; a chapter that needs a local
# letter defines it where it first uses it and never reuses one of these. The last column is what the
# lint in `scaleoutai.notebooks.notation` enforces: the things a symbol must never count. The table is
# rendered straight from `chapters/notation.yaml`.

# %%
display(Markdown(glossary.render_notation(NOTATION)))

# %% [markdown]
# Two naming rules travel with the table. "Scale out" is the verb and "scale-out" the adjective or noun
# (likewise "scale up" and "scale-up"). And the actors have fixed roles: a *worker* does a share of the
# computation, a *coordinator* plans and combines, a *shard* is one piece of data or parameters, a
# *replica* is a whole copy of a model or service. Every symbol's first use must be a chapter that
# exists; the cell asserts it.

# %%
import re

for name, entry in NOTATION.items():
    chapter = int(re.fullmatch(r"Ch (\d+)", entry["first_use"])[1])
    assert chapter in CHAPTERS, f"{name}: first use Chapter {chapter} does not exist"
print("every symbol's first-use chapter exists:", sorted({e["first_use"] for e in NOTATION.values()},
                                                         key=lambda s: int(s.split()[1])))

# %% [markdown]
# ## 3. The pattern: one source, many readers
#
# Each glossary entry names its owner, the chapter (or appendix letter) that develops it; a term whose
# chapter is not written yet would carry `planned: true` (none does today: all 41 chapters exist). A `symbol:` ties
# a term to its notation entry, and `see:` to related terms. The same two files feed the notation lint
# of every chapter, this appendix, and the course index; the five course paths in `syllabi/` are
# checked against the same chapter folders. Below, the glossary by owning chapter.

# %%
assert all(t.owner in CHAPTERS or t.planned for t in TERMS)
if SHOW_GLOSSARY:
    display(Markdown(glossary.render_markdown(TERMS, TITLES, level=4)))
else:
    print(f"{len(TERMS)} terms over {len({t.owner for t in TERMS})} owners")

# %% [markdown]
# The `see:` links form a graph over the terms. Grouping its edges by the part of the course that owns
# each end shows the preface's dependency graph from the vocabulary's side: Part I's words are the
# ones every later part leans on.

# %%
from collections import Counter

PARTS = [("I", range(1, 6)), ("II", range(6, 10)), ("III", range(10, 15)), ("IV", range(15, 22)),
         ("V", range(22, 27)), ("VI", range(27, 33)), ("VII", range(33, 36)), ("VIII", range(36, 42))]


def part_of(owner):
    return next((p for p, span in PARTS if owner in span), "App") if isinstance(owner, int) else "App"


by_name = {glossary.normalize(n): t for t in TERMS for n in (t.term, *t.aliases)}
edges = Counter((part_of(t.owner), part_of(by_name[glossary.normalize(s)].owner)) for t in TERMS for s in t.see)
into = Counter()
for (src, dst), n in edges.items():
    if src != dst:
        into[dst] += n
print("see-links arriving from other parts:", dict(into.most_common()))
assert into.most_common(1)[0][0] == "I", into

# %% [markdown]
# ## 4. A minimal from-scratch implementation: the glossary checker
#
# A glossary goes wrong in a few typical ways: a term points at a chapter that does not exist, the same
# term is defined twice under spellings that differ only in case or punctuation ("All-reduce",
# "ALL_REDUCE"), a `symbol:` names a letter the notation table lacks, or names one whose meaning
# contradicts the term (a "device count" tagged with the parameter count). `check_glossary` returns one
# line per problem; names are compared through `normalize`.

# %%
from scaleoutai.notebooks import show

show(glossary.normalize)
show(glossary.check_glossary)

# %% [markdown]
# The real glossary has no problems, every name is unique after normalization (`tests/test_glossary.py`
# also checks that each of the 164 entries of the book's three glossaries, from "All-gather" to
# "NCCL_SOCKET_IFNAME", is a term or an alias here), and the examples land where they belong:
# all-reduce in Chapter 4, tensor parallelism in Chapter 16, the Byzantine fault in Chapter 35.

# %%
problems = glossary.check_glossary(TERMS, ROOT)
assert problems == [], problems
keys = [glossary.normalize(n) for t in TERMS for n in (t.term, *t.aliases)]
assert len(keys) == len(set(keys))
owner = {t.term: t.owner for t in TERMS}
assert owner["All-reduce"] == 4 and owner["Tensor parallelism"] == 16 and owner["Byzantine fault"] == 35
print(f"{len(TERMS)} terms, {len(keys) - len(TERMS)} aliases, no problems")

# %% [markdown]
# ## 5. The same task with a production library: JSON Schema
#
# The shape of the file (which fields exist, their types, owners 1-41 or A-D) is what a schema
# validator is for. We state it as a JSON Schema and run the `jsonschema` library on the parsed YAML.
# The comparison is the point: the schema accepts the real file and rejects a malformed entry just as
# our loader does, but it cannot see the mistakes that need the rest of the course (a chapter folder
# that is missing, a duplicate spelled differently, a symbol's meaning). Those are why the checker of
# Section 4 exists.

# %%
import copy
import tempfile

import jsonschema
import yaml

SCHEMA = {
    "type": "object", "required": ["terms"],
    "properties": {"source": {"type": "string"}, "terms": {"type": "array", "minItems": 1, "items": {
        "type": "object", "additionalProperties": False, "required": ["term", "owner", "definition"],
        "properties": {
            "term": {"type": "string", "minLength": 1}, "definition": {"type": "string", "minLength": 20},
            "owner": {"oneOf": [{"type": "integer", "minimum": 1, "maximum": 41}, {"enum": ["A", "B", "C", "D"]}]},
            "aliases": {"type": "array", "items": {"type": "string", "minLength": 1}, "uniqueItems": True},
            "symbol": {"type": "string"}, "see": {"type": "array", "items": {"type": "string"}},
            "planned": {"type": "boolean"}}}}}}
validator = jsonschema.Draft202012Validator(SCHEMA)
raw = yaml.safe_load((ROOT / "chapters" / "glossary.yaml").read_text())
assert list(validator.iter_errors(raw)) == []


def verdicts(doc):
    """(schema errors, our loader's or checker's problems) for one glossary document."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "glossary.yaml"
        path.write_text(yaml.safe_dump(doc))
        try:
            ours = glossary.check_glossary(glossary.load_glossary(path), ROOT)
        except ValueError as exc:
            ours = [str(exc)]
    return [e.message for e in validator.iter_errors(doc)], ours


bad_owner, duplicate, missing = copy.deepcopy(raw), copy.deepcopy(raw), copy.deepcopy(raw)
bad_owner["terms"][0]["owner"] = "Z"
duplicate["terms"].append({"term": "ALL_REDUCE", "owner": 4, "definition": "The same collective defined a second time."})
missing["terms"].append({"term": "Hash join", "owner": 36, "planned": True,
                          "definition": "Joining two tables by hashing the key on both sides."})
for name, doc, schema_sees in (("owner 'Z'", bad_owner, True), ("duplicate", duplicate, False),
                               ("chapter 36 still marked planned", missing, False)):
    schema_errors, ours = verdicts(doc)
    assert bool(schema_errors) == schema_sees and ours, (name, schema_errors, ours)
    print(f"{name:32s} jsonschema: {'rejects' if schema_errors else 'accepts'}   ours: {ours[0][:90]}")

# %% [markdown]
# ## 6. Failure modes: what the checks catch
#
# Three kinds of drift are worth seeing fail. A chapter's prose can use a book symbol for something
# else; the notation lint flags the sentence (the example sentences live in a code cell because the
# lint reads this appendix's own markdown too). A glossary entry can claim a symbol that means
# something else. And a course path can keep a chapter under `planned_chapters` after it was written
# (or name one that does not exist). Each failure is one readable line.

# %%
from scaleoutai.notebooks.notation import lint_source, load_notation

with tempfile.TemporaryDirectory() as tmp:
    chapter = Path(tmp) / "chapter.py"
    chapter.write_text("# %% [markdown]\n# # Chapter 99. Drift\n#\n# We train on $P$ devices with a ring.\n"
                       "# Each worker holds $b$ examples, so $B = K b$.\n")
    findings = lint_source(chapter, load_notation(ROOT / "chapters" / "notation.yaml"))
print("\n".join(findings))
assert len(findings) == 1 and findings[0].startswith("chapter.py:4:")

# The lint's two rules (scaleoutai.notebooks.notation): 1. a symbol tied to a noun of its `not` list;
# 2. a symbol with `context` words (epsilon: privacy, delta, budget, ...) in a paragraph naming none.
with tempfile.TemporaryDirectory() as tmp:
    chapter = Path(tmp) / "chapter.py"
    chapter.write_text("# %% [markdown]\n# # Chapter 99. Drift\n#\n# A game of $N$ players.\n"
                       "# The inertia weight $w$ damps each particle.\n#\n"
                       "# The attackers send $-\\varepsilon$ times the honest mean.\n#\n"
                       "# A game of $M$ players; each run spends $\\varepsilon$ of the privacy budget.\n")
    findings = lint_source(chapter, load_notation(ROOT / "chapters" / "notation.yaml"))
print("\n".join(f[:110] for f in findings))
assert [f.split(":")[1] for f in findings] == ["4", "5", "7"]

wrong_symbol = copy.deepcopy(raw)
wrong_symbol["terms"].append({"term": "Device count", "owner": 19, "symbol": "P",
                              "definition": "How many accelerators one training job runs on."})
_, ours = verdicts(wrong_symbol)
print(ours[0])
assert len(ours) == 1 and "never counts device" in ours[0]

path = syllabi.find_path("big-data-algorithms", ROOT)
weeks = list(path.weeks)
weeks[11] = syllabi.Week(12, chapters=(), planned=(36,), reading="web-scale RAG")  # as before Chapter 36 was written
broken = syllabi.CoursePath(path.name, path.title, path.focus, tuple(weeks), path.file)
found = syllabi.check_path(broken, ROOT)
print(found[0])
assert len(found) == 1 and "move it from planned_chapters to chapters" in found[0]

# %% [markdown]
# ## 7. Evaluation: coverage of the vocabulary
#
# Two measurements. First, how the terms spread over the parts of the course. Second, a check of the
# links themselves: for each term whose owner exists, does that chapter's source actually use the term
# or one of its aliases? A term its owner never mentions is either owned by the wrong chapter or
# missing an alias; we report the rate and the misses rather than pretend it is complete.

# %%
import matplotlib.pyplot as plt


def squash(text):
    return " " + re.sub(r"[^a-z0-9]+", " ", text.lower()) + " "


scanned = sorted(k for k in CHAPTERS if isinstance(k, int))[:SCAN_CHAPTERS] + [k for k in CHAPTERS if isinstance(k, str)]
texts = {k: squash((CHAPTERS[k] / f"{CHAPTERS[k].name}.py").read_text()) for k in scanned}
mentioned, misses = Counter(), []
owned = Counter(part_of(t.owner) for t in TERMS if t.owner in texts)
for t in TERMS:
    if t.owner in texts:
        names = [squash(n).strip() for n in (t.term, *t.aliases)]
        if any(f" {n} " in texts[t.owner] or f" {n}s " in texts[t.owner] for n in names):
            mentioned[part_of(t.owner)] += 1
        else:
            misses.append(f"Ch {t.owner}: {t.term}")
rate = sum(mentioned.values()) / max(1, sum(owned.values()))
print(f"{sum(mentioned.values())} of {sum(owned.values())} terms appear in their owning chapter ({rate:.0%})")
print("not found in the owner's text:", "; ".join(misses))
assert rate >= 0.8

per_part = Counter(part_of(t.owner) for t in TERMS)
labels = [p for p, _ in PARTS] + ["App"]
fig, ax = plt.subplots(figsize=(8, 3.2))
ax.bar(labels, [per_part[p] for p in labels], color="lightgray", label="terms owned")
ax.bar(labels, [mentioned[p] for p in labels], color="tab:blue", label="used in the owning chapter")
ax.set_xlabel("part of the course")
ax.set_ylabel("terms")
ax.set_title("Glossary terms by owning part")
ax.legend()
plt.tight_layout()
plt.show()

# %% [markdown]
# Part I owns the most terms because the collectives, the cost model and the failure vocabulary are
# defined once there and reused everywhere. Part VIII owns few terms: its case studies compose the
# vocabulary of the earlier parts. The gray part of each bar is the list of misses printed above.
#
# ### The five course paths
#
# The preface (Section 0.5) gives five one-semester paths through the book, each starting in Part I
# and ending with the Chapter 41 capstone. Each lives in `syllabi/NAME.yaml` and is checked against the
# chapter and lab folders; `scaleout notebooks list --path NAME` prints one week by week.

# %%
paths = syllabi.load_paths(ROOT)
assert [p.name for p in paths] == list(syllabi.ORDER)
for p in paths:
    assert syllabi.check_path(p, ROOT) == [], p.name
    planned = sorted({c for w in p.weeks for c in w.planned})
    print(f"{p.title:42s} {len(p.weeks)} weeks  chapters {p.chapters()}" + (f"  planned {planned}" if planned else ""))
print()
print(syllabi.format_path(paths[0], ROOT))

# %% [markdown]
# ## 8. Exercises
#
# 1. Add a term you met in a chapter and found missing (for example "hot spare" or "straggler
#    mitigation"), with its owner and `see:` links, and run `pytest tests/test_glossary.py`.
# 2. Section 7 lists terms their owners never mention. Pick three and decide, by reading the chapters,
#    whether the owner or the aliases are wrong; fix the file and watch the rate rise.
# 3. Extend the notation lint so that a chapter defining one of the glossary's terms with a different
#    owner's meaning is flagged. What false positives do you get, and how would you suppress them?
# 4. Write `syllabi/my-course.yaml` for a ten-week quarter on serving (Part I, then Part V) and print it
#    with `scaleout notebooks list --path my-course`. Which check fails, and is the preface's 13-15 week
#    rule the right one for a quarter?
# 5. The schema of Section 5 cannot express "owner exists". Which JSON Schema features (dynamic
#    references, `$data` proposals) come closest, and why does a cross-file check still need code?
#
# ## 9. Research directions
#
# - **Linking symbols to their meaning automatically.** Mathematical prose defines letters implicitly
#   and reuses them across sections; tools that extract each identifier's definition from the text
#   would let a lint like ours work without a hand-written `not:` list.
#   - Alexeeva, Sharp, Valenzuela-Escarcega, Kadowaki, Pyarelal and Morrison, "MathAlign: Linking
#     Formula Identifiers to their Contextual Natural Language Descriptions", LREC, 2020. Identifier to
#     description alignment in scientific papers.
#   - Kohlhase, "Using LaTeX as a Semantic Markup Format", Mathematics in Computer Science, 2008. Marking
#     up what a symbol means, not only how it looks.
# - **Building glossaries and ontologies from documents.** Which terms a field uses, and how they
#   relate, can be mined from text; keeping such a vocabulary in step with a growing corpus is open.
#   - Navigli and Velardi, "Learning Domain Ontologies from Document Warehouses and Dedicated Web
#     Sites", Computational Linguistics, 2004. Term extraction and taxonomy induction from domain text.
#   - Gruber, "A Translation Approach to Portable Ontology Specifications", Knowledge Acquisition, 1993.
#     What it means for communities to commit to a shared vocabulary.
#   - Babaei Giglou, D'Souza and Auer, "LLMs4OL: Large Language Models for Ontology Learning", arXiv
#     preprint, 2023. Tests language models zero-shot on term typing, taxonomy discovery and relation
#     extraction over WordNet, GeoNames and UMLS, the steps of building a glossary from text.
# - **Executable, checkable books.** A chapter that runs and asserts its claims cannot silently rot,
#   but notebooks in the wild mostly fail to re-run; making that the norm is still research.
#   - Knuth, "Literate Programming", The Computer Journal, 1984. Programs written to be read as prose.
#   - Pimentel, Murta, Braganholo and Freire, "A Large-Scale Study About Quality and Reproducibility of
#     Jupyter Notebooks", MSR, 2019. How few published notebooks run again.
#   - Samuel and Mietchen, "Computational reproducibility of Jupyter notebooks from biomedical
#     publications", GigaScience, 2024. Re-ran thousands of notebooks linked from PubMed Central papers;
#     only a small fraction ran without error and fewer still reproduced their published results.
# - **Shared metadata for data and models.** The same discipline of one name per thing, at the scale of
#   datasets and models shared between labs.
#   - Wilkinson et al., "The FAIR Guiding Principles for Scientific Data Management and Stewardship",
#     Scientific Data, 2016. Findable, accessible, interoperable, reusable metadata.
#   - Akhtar et al., "Croissant: A Metadata Format for ML-Ready Datasets", arXiv preprint, 2024. One
#     machine-readable description of a dataset's files, structure and semantics that several large
#     dataset hubs already publish and ML frameworks can load directly.
#
# ## What's next
#
# Appendix D (Datasets and benchmarks) lists every dataset the course generates, with its seed, size,
# loader and the chapters that use it. If you came here first, start the course with Chapter 1 (Why scale out); if
# you came from a chapter, return to it, and on the way to the Chapter 41 capstone keep this table and
# glossary open beside your report.
