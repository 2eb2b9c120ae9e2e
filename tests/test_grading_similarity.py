"""`scaleout grade similarity`: planted copies rank above honest pairs, pastes from the edition are flagged."""
from __future__ import annotations

import ast
import csv
import inspect
import random
import re
from pathlib import Path

import pytest

from grading_helpers import notebook
from scaleoutai import collectives
from scaleoutai.cli import main
from scaleoutai.grading import similarity as S
from scaleoutai.grading.labs import STUB, assign, find_lab, read_cells

ROOT = Path(__file__).resolve().parents[1]

# The honest solution the copies are made from: helpers, so that reordering them means something.
HONEST = '''
def neighbours(comm):
    """Left and right ranks on the ring."""
    return (comm.rank - 1) % comm.size, (comm.rank + 1) % comm.size


def reduce_scatter_phase(comm, parts):
    left, right = neighbours(comm)
    K, me = comm.size, comm.rank
    for step in range(K - 1):
        outgoing = (me - step) % K  # the partial sum I pass on
        comm.send(parts[outgoing], right)
        incoming = (me - step - 1) % K
        parts[incoming] = parts[incoming] + comm.recv(left)
    return parts


def all_gather_phase(comm, parts):
    left, right = neighbours(comm)
    K, me = comm.size, comm.rank
    for step in range(K - 1):
        comm.send(parts[(me + 1 - step) % K], right)
        parts[(me - step) % K] = comm.recv(left)
    return parts


def halving_doubling_allreduce(comm, x):
    """Sum of ``x`` over all ranks, on every rank, by reduce-scatter then all-gather on a ring."""
    if comm.size == 1:
        return x.copy()
    parts = [p.copy() for p in np.array_split(x, comm.size)]
    parts = reduce_scatter_phase(comm, parts)
    parts = all_gather_phase(comm, parts)
    return np.concatenate(parts)
'''

# Independent correct answers to the same lab (each checked on the simulator when written).
WHILE_LOOPS = '''
def halving_doubling_allreduce(comm, x):
    """Sum of ``x`` over all ranks, on every rank, by reduce-scatter then all-gather on a ring."""
    size = comm.size
    rank = comm.rank
    if size == 1:
        return x.copy()
    pieces = np.array_split(x.copy(), size)
    nxt = (rank + 1) % size
    prv = (rank - 1) % size
    s = 0
    while s < size - 1:
        comm.send(pieces[(rank - s) % size], nxt)
        j = (rank - s - 1) % size
        pieces[j] = np.add(pieces[j], comm.recv(prv))
        s += 1
    s = 0
    while s < size - 1:
        comm.send(pieces[(rank - s + 1) % size], nxt)
        pieces[(rank - s) % size] = comm.recv(prv).astype(x.dtype)
        s += 1
    result = np.concatenate(pieces)
    return result.astype(x.dtype)
'''

SLICES = '''
def halving_doubling_allreduce(comm, x):
    """Sum of ``x`` over all ranks, on every rank, by reduce-scatter then all-gather on a ring."""
    world, me = comm.size, comm.rank
    out = np.array(x, copy=True)
    sizes = [len(c) for c in np.array_split(np.arange(len(x)), world)]
    bounds = np.concatenate([[0], np.cumsum(sizes)])
    def chunk(i):
        i %= world
        return slice(bounds[i], bounds[i + 1])
    for step in range(world - 1):
        comm.send(out[chunk(me - step)].copy(), (me + 1) % world)
        got = comm.recv((me - 1) % world)
        out[chunk(me - step - 1)] += got
    for step in range(world - 1):
        comm.send(out[chunk(me - step + 1)].copy(), (me + 1) % world)
        out[chunk(me - step)] = comm.recv((me - 1) % world)
    return out
'''

DICT = '''
def halving_doubling_allreduce(comm, x):
    """Sum of ``x`` over all ranks, on every rank, by reduce-scatter then all-gather on a ring."""
    K = comm.size
    r = comm.rank
    if K == 1:
        return np.copy(x)
    split = {i: part.copy() for i, part in enumerate(np.array_split(x, K))}
    # reduce-scatter
    for s in range(K - 1):
        send_id = (r - s) % K
        recv_id = (r - s - 1) % K
        comm.send(split[send_id], (r + 1) % K)
        split[recv_id] += comm.recv((r - 1) % K)
    # all-gather
    for s in range(K - 1):
        comm.send(split[(r - s + 1) % K], (r + 1) % K)
        split[(r - s) % K] = comm.recv((r - 1) % K)
    return np.concatenate([split[i] for i in range(K)])
'''


def renamed(src: str, names: dict[str, str]) -> str:
    return re.sub(r"\b(" + "|".join(names) + r")\b", lambda m: names[m.group(1)], src)


def reordered(src: str, order: list[int]) -> str:
    funcs = src.strip().split("\n\n\n")
    return "\n\n\n".join(funcs[i] for i in order) + "\n"


def restyled(src: str) -> str:
    """Other comments, blank lines and spacing; the same code."""
    out = []
    for line in src.splitlines():
        code = line.split("  #")[0].rstrip().replace(", ", " ,  ").replace("(", "( ")
        out += [code + ("   # here" if "=" in code else "")] + ([""] if code.strip().startswith("for ") else [])
    return "\n".join(out) + "\n"


def pasted() -> str:
    """The library's ring all-reduce (reduce-scatter + all-gather), pasted and adapted: no docstrings, type
    hints or comments, reformatted, variables renamed."""
    tree = ast.parse("\n".join(inspect.getsource(f) for f in (collectives.reduce_scatter, collectives.all_gather,
                                                             collectives.ring_allreduce)))
    for fn in tree.body:
        fn.returns, fn.body = None, fn.body[1:]
        for arg in fn.args.args:
            arg.annotation = None
    return renamed(ast.unparse(tree), {"acc": "buf", "blk": "blocks", "mine": "my_block", "f": "add"})


COPIES = {
    "honest": HONEST,
    "renamed": renamed(HONEST, {"neighbours": "ring_peers", "reduce_scatter_phase": "phase_one", "K": "n",
                                "all_gather_phase": "phase_two", "parts": "blocks", "step": "t", "me": "rank",
                                "outgoing": "send_idx", "incoming": "recv_idx", "left": "src", "right": "dst"}),
    "reordered": restyled(reordered(HONEST, [3, 2, 0, 1])),
    "both": renamed(reordered(HONEST, [2, 1, 0, 3]), {"parts": "chunks", "step": "i", "me": "who", "K": "size",
                                                      "neighbours": "peers", "left": "lft", "right": "rgt"}),
}
OTHERS = {"while_loops": WHILE_LOOPS, "slices": SLICES, "dict": DICT}


@pytest.fixture(scope="module")
def release(tmp_path_factory) -> list[str]:
    lab = find_lab("lab04", ROOT)
    return [c["source"] for c in read_cells(assign(lab, tmp_path_factory.mktemp("rel")) / f"{lab.name}.ipynb")]


def submit(path: Path, release: list[str], code: str | None) -> Path:
    """The released notebook with its stub cell replaced by ``code`` (None: handed in untouched)."""
    cells = [code.strip("\n") if code is not None and STUB in c else c for c in release]
    return notebook(path, *cells, tags={len(cells) - 1: ["public-tests"]})


@pytest.fixture(scope="module")
def report(tmp_path_factory, release) -> S.Report:
    subs = tmp_path_factory.mktemp("subs")
    for name, code in {**COPIES, **OTHERS, "pasted": pasted(), "starter": None}.items():
        submit(subs / f"{name}.ipynb", release, code)
    return S.compare(find_lab("lab04", ROOT), [subs])


def test_every_planted_copy_ranks_above_every_honest_pair(report):
    def copy(p):
        return {p.a.name, p.b.name} <= set(COPIES)
    planted = [p.score for p in report.pairs if copy(p)]
    honest = [p.score for p in report.pairs if not copy(p)]
    assert len(planted) == 6 and len(honest) == 36 - 6
    assert min(planted) > 0.85 and max(honest) < 0.4, (min(planted), max(honest))
    assert all(copy(p) for p in report.pairs[:6])


def test_a_paste_from_the_course_library_is_flagged_against_the_edition(report):
    pasted = report.edition[0]
    assert pasted.doc.name == "pasted" and pasted.share >= max(S.FLAG, 0.6)
    assert report.file(pasted.files[0][0]) == "src/scaleoutai/collectives.py"
    assert max(s.share for s in report.edition[1:]) < 0.3


def test_the_starter_code_alone_scores_zero(report):
    starter = next(d for d in report.docs if d.name == "starter")
    assert starter.size == 0 and not starter.fp
    assert all(p.score == 0 for p in report.pairs if "starter" in (p.a.name, p.b.name))
    assert next(s.share for s in report.edition if s.doc.name == "starter") == 0


def test_normalise_renames_identifiers_and_literals_and_drops_comments():
    a = S.normalise("total = count + 1  # one more\nprint(name.upper(), 'x')\n")
    b = S.normalise("s = n + 2\n\n# other\nprint(who.upper(), \"y\")\n")
    assert [t for t, _ in a] == [t for t, _ in b]
    assert [t for t, _ in a][:4] == ["V", "=", "V", "+"] and "upper" in [t for t, _ in a]
    assert [ln for _, ln in a][-1] == 2 and S.normalise("def f(:\n  x = 'open\n")  # broken code: no exception


def test_winnowing_keeps_a_fingerprint_of_every_long_shared_run():
    rng = random.Random(0)
    hashes = [rng.randrange(1 << 30) for _ in range(500)]
    picked = S.winnow(hashes)
    assert all(any(i <= p < i + S.W for p in picked) for i in range(len(hashes) - S.W + 1))
    assert S.winnow([]) == [] and S.winnow([5, 3]) == [1]


def test_cli_writes_an_escaped_report_and_the_pairs(tmp_path, capsys, monkeypatch, release):
    monkeypatch.chdir(ROOT)
    hostile = HONEST.replace("    return parts\n", "    return parts  # </pre><script>alert(1)</script>\n", 1)
    submit(tmp_path / "subs" / "amy.ipynb", release, hostile)
    submit(tmp_path / "subs" / "bob" / "lab04.ipynb", release, hostile.replace("parts", "blocks"))
    submit(tmp_path / "subs" / "cid.ipynb", release, SLICES)
    (tmp_path / "subs" / "broken.ipynb").write_text("not a notebook")
    out = tmp_path / "sim"
    assert main(["grade", "similarity", "lab04", str(tmp_path / "subs"), "--out", str(out), "--top", "2"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].startswith("similarity of 3 submissions") and "1 not compared" in lines[0]
    assert "amy ~ bob" in lines[1] and len(lines) == 3
    page = (out / "report.html").read_text()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "<script" not in page
    assert not re.search(r"(src|href)=['\"]?(https?:|//)", page) and "broken: " in page
    rows = list(csv.DictReader((out / "pairs.csv").open()))
    assert len(rows) == 3 and (rows[0]["a"], rows[0]["b"]) == ("amy", "bob") and float(rows[0]["score"]) > 0.9
    assert (out / "edition.csv").is_file() and not list(out.glob(".*"))  # no temp files left


def test_grade_similarity_runs_after_the_batch(tmp_path, capsys, monkeypatch, release):
    from scaleoutai.grading import runner

    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(runner, "grade_batch", lambda lab, paths, out, **kw: runner.Summary(graded=2, out=out))
    submit(tmp_path / "subs" / "amy.ipynb", release, HONEST)
    submit(tmp_path / "subs" / "bob.ipynb", release, DICT)
    assert main(["grade", "lab04", str(tmp_path / "subs"), "--out", str(tmp_path / "g"), "--similarity"]) == 0
    assert "similarity of 2 submissions" in capsys.readouterr().out
    assert (tmp_path / "g" / "similarity" / "report.html").is_file()


@pytest.mark.parametrize("argv,msg", [
    (["grade", "similarity", "lab99", "{subs}"], "no lab named"),
    (["grade", "similarity", "lab04"], "usage: scaleout grade similarity"),
    (["grade", "similarity", "lab04", "{empty}"], "no submissions under"),
    (["grade", "similarity", "lab04", "{subs}/nobody.ipynb"], "does not exist"),
    (["grade", "similarity", "lab04", "{subs}", "--out", "{subs}/amy.ipynb/x"], "cannot write the report"),
])
def test_bad_input_gets_one_line_and_exit_2(argv, msg, tmp_path, capsys, monkeypatch, release):
    monkeypatch.chdir(ROOT)
    submit(tmp_path / "subs" / "amy.ipynb", release, HONEST)
    (tmp_path / "empty").mkdir()
    argv = [a.format(subs=tmp_path / "subs", empty=tmp_path / "empty") for a in argv]
    assert main(argv + (["--out", str(tmp_path / "o")] if "--out" not in argv else [])) == 2
    err = capsys.readouterr().err
    assert msg in err and len(err.strip().splitlines()) == 1


def test_lab_copy_figures_measures_one_lab(capsys, monkeypatch):
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location("lab_copy_figures", ROOT / "benchmarks" / "lab_copy_figures.py")
    script = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "lab_copy_figures", script)
    spec.loader.exec_module(script)
    assert script.main(["--lab", "lab04", "--markdown", "--no-baseline"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("| lab | lines | verbatim %")
    (row,) = [ln for ln in out if ln.startswith("| `lab04-ring-allreduce`")]
    cells = [float(c) for c in row.strip("| ").split(" | ")[1:]]
    counts, shares = [cells[0], cells[3]], [cells[1], cells[2], cells[4], cells[5], cells[6]]
    assert all(c > 0 and c == int(c) for c in counts) and all(0 <= s <= 100 for s in shares)
