"""Hostile submissions to lab 4, one per attack class: each gains nothing, harms no other submission,
gets a clear message, and the batch completes."""
from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest

from grading_helpers import HONEST, WRONG, notebook, output_of, results
from scaleoutai.grading.labs import find_lab
from scaleoutai.grading.runner import grade_batch
from scaleoutai.grading.jail import Limits, probe_mode, uid_alive
from scaleoutai.grading.sandbox import UID_BASE

ROOT = Path(__file__).resolve().parents[1]
pytestmark = [pytest.mark.timeout(240),
              pytest.mark.skipif(os.geteuid() != 0, reason="the sandbox drops privileges and needs root")]


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    if probe_mode() != "full":
        pytest.skip("this machine forbids mount and network namespaces")
    subs = tmp_path_factory.mktemp("subs")
    out = tmp_path_factory.mktemp("out")
    os.environ["SCALEOUT_GRADER_SECRET"] = SECRET  # an instructor's variable the sandbox must never hold
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    grading = ROOT / "grading" / "lab04-ring-allreduce" / "tests.py"
    solution = ROOT / "labs" / "lab04-ring-allreduce" / "lab04-ring-allreduce.py"
    patch = '''
import builtins, numpy as np
np.allclose = lambda *a, **k: True
np.array_equal = lambda *a, **k: True
np.testing.assert_allclose = lambda *a, **k: None
builtins.abs = lambda v: 0
class Liar(np.ndarray):
    def __eq__(self, other):
        return True
def halving_doubling_allreduce(comm, x):
    return x.copy().view(Liar)
'''
    forge = f'''
import json
for path in ("results.json", {str(out / "forge" / "results.json")!r}, {str(out / "gradebook.csv")!r}):
    try:
        open(path, "w").write(json.dumps({{"score": 100, "max_score": 100, "tests": []}}))
        print("wrote", path)
    except OSError as exc:
        print("forge-denied", type(exc).__name__)
'''
    read = f'''
import os
for path in ({str(grading)!r}, {str(solution)!r}, {str(ROOT / ".git" / "HEAD")!r}, {str(subs / "net.ipynb")!r}):
    try:
        print(open(path).read()[:200])
    except OSError as exc:
        print("read-denied", type(exc).__name__)
try:
    print(os.listdir({str(grading.parent)!r}))
except OSError as exc:
    print("list-denied", type(exc).__name__)
print("uid", os.getuid())
print("pids", sorted(int(p) for p in os.listdir("/proc") if p.isdigit()))
'''
    env = f'''
import os
found = {SECRET!r} in str(dict(os.environ))
for path in ("/proc/self/environ", "/proc/1/environ"):
    try:
        found = found or {SECRET!r}.encode() in open(path, "rb").read()
    except OSError:
        pass  # the process is not dumpable once it dropped to its uid
print("secret-found" if found else "secret-absent")
'''
    fill = '''
import os
for d in ("/tmp", "/dev/shm", "/var/tmp", "."):
    assert not [n for n in os.listdir(d) if n.startswith("filler")], "a previous submission left files in " + d
    try:
        with open(os.path.join(d, "filler"), "wb") as f:
            for _ in range(80):
                f.write(b"x" * (1 << 20))
        print("fill-unbounded", d)
    except OSError as exc:
        print("fill-stopped", d, exc.errno)
'''
    huge = "\n".join(f"v{i} = {i}" for i in range(40_000))  # 0.5 MB of code
    forge_status = '''
import os
open("setup_error.txt", "w").write("forged")
os._exit(86)
'''
    html = "print('<script>alert(1)</script><b>bold</b>')"
    links = f'''
import os
for name, target in (("out", {str(out)!r}), ("results.json", {str(out / "gradebook.csv")!r}), ("_done.json", "/proc/1/root"),
                     ("cells.json", {str(subs)!r})):
    try:
        os.symlink(target, name)
        print("linked", name)
    except OSError as exc:
        print("link-failed", name, type(exc).__name__)
'''
    flood = HONEST.replace("K, r = comm.size, comm.rank", "K, r = comm.size, comm.rank\n    while K > 1:\n"
                         "        comm.send(np.zeros(1 << 20), (r + 1) % K)")
    net = f'''
import socket
for host, port in (("127.0.0.1", {port}), ("1.1.1.1", 80)):
    try:
        socket.create_connection((host, port), timeout=1).close()
        print("net-open", host)
    except OSError as exc:
        print("net-blocked", host, type(exc).__name__)
'''
    bomb_mem = HONEST.replace("K, r = comm.size, comm.rank", "blocks = []\n    while True:\n        blocks.append(np.ones(2**24))")
    cases = {
        "patch": (WRONG, patch), "forge": (WRONG, forge), "read": (HONEST, read), "net": (HONEST, net),
        "loop": (HONEST, "while True:\n    pass"), "membomb": (bomb_mem,),
        "forkbomb": (HONEST, "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass"),
        "sysexit": (HONEST.replace("K, r = comm.size, comm.rank", "import sys; sys.exit(3)"),),
        "osexit": (HONEST, "import os; os._exit(0)"), "print": (HONEST, "print('x' * 100_000_000)"),
        "missing": (HONEST.replace("def halving_doubling_allreduce", "def halving_doubling_all_reduce"),),
        "env": (HONEST, env), "fill": (HONEST, fill), "fill2": (HONEST, fill), "huge": (HONEST, huge),
        "forgestatus": (HONEST, forge_status), "html": (HONEST, html), "links": (WRONG, links), "flood": (flood,), "gradebook.csv": (WRONG,), "amy-2": (WRONG,),
        "wrongtype": (HONEST.replace("return acc", "return acc.tolist()"),),
    }
    for name, cells in cases.items():
        notebook(subs / f"{name}.ipynb", *cells)
    (subs / "malformed.ipynb").write_text("{ this is not a notebook")
    (subs / "amy").mkdir()
    notebook(subs / "amy" / "amy.ipynb", HONEST)  # id "amy"; a second "amy" must not take the honest "amy-2"
    notebook(subs / "amy.ipynb", WRONG)
    summary = grade_batch(find_lab("lab04", ROOT), [subs], out, jobs=2, quiet=True,
                          limits=Limits(timeout=20, memory_mb=1500))
    listener.close()
    return out, summary


SECRET = "instructor-secret-4f9c2e"
EXPECTED = {"patch": 0.0, "forge": 2.5, "read": 100.0, "net": 100.0, "loop": 0.0, "membomb": 0.0, "forkbomb": 0.0,
            "sysexit": 0.0, "osexit": 0.0, "print": 100.0, "missing": 0.0, "wrongtype": 0.0, "malformed": 0.0,
            "env": 100.0, "fill": 100.0, "fill2": 100.0, "huge": 75.0, "forgestatus": 0.0, "html": 100.0, "links": 2.5, "flood": 2.5,
            "gradebook.csv-2": 2.5, "amy-2": 2.5, "amy": 2.5, "amy-3": 100.0}


def test_batch_of_hostile_submissions_completes_with_one_result_each(batch):
    out, summary = batch
    assert summary.graded == len(EXPECTED)
    rows = (out / "gradebook.csv").read_text().splitlines()
    assert sorted(r.split(",")[0] for r in rows[1:]) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_hostile_submission_gets_the_right_score(batch, name):
    assert results(batch[0], name)["score"] == pytest.approx(EXPECTED[name])


def test_patching_numpy_and_builtins_in_the_sandbox_cannot_change_the_score(batch):
    res = results(batch[0], "patch")  # wrong sums behind an ndarray subclass whose == always says True
    assert "passed 0 of 10 cases" in output_of(res, "halving_doubling_allreduce is correct on the simulator")
    assert "is a Liar; return a NumPy array" in output_of(res, "halving_doubling_allreduce is correct on the simulator")


def test_forged_result_files_are_ignored_and_the_results_folder_is_out_of_reach(batch):
    out = batch[0]
    res = results(out, "forge")
    assert not (out / "forge" / "results.json").read_text().count('"tests": []')
    log = output_of(res, "Notebook runs")
    assert "wrote results.json" in log  # its own working dir only, which nobody reads
    assert log.count("forge-denied") == 2


def test_student_code_cannot_read_hidden_tests_or_the_solution_and_runs_unprivileged(batch):
    log = output_of(results(batch[0], "read"), "Notebook runs")
    # the course repository, its git history and other submissions are not in the sandbox's root at all
    assert log.count("read-denied FileNotFoundError") == 4 and "list-denied" in log
    uid = int(log.split("uid ")[1].split()[0])  # a sandbox uid of whichever slot block was free
    assert UID_BASE <= uid < UID_BASE + 256 * 16 and (uid - UID_BASE) % 16 == 0
    pids = json.loads(log.split("pids ")[1].splitlines()[0])
    assert pids and max(pids) < 20  # its own PID namespace: no neighbour's /proc to reach


def test_no_variable_of_the_grader_survives_anywhere_in_the_sandbox(batch):
    assert "secret-absent" in output_of(results(batch[0], "env"), "Notebook runs")
    from scaleoutai.grading.zygote import Zygote

    z = Zygote("full")  # every sandbox is forked from it: its memory never held the grader's environment
    try:
        assert SECRET.encode() not in open(f"/proc/{z._proc.pid}/environ", "rb").read()
        assert "SCALEOUT_GRADER_SECRET" in os.environ
    finally:
        z.close()


def test_private_temporary_space_is_capped_and_starts_empty(batch):
    for name in ("fill", "fill2"):
        log = output_of(results(batch[0], name), "Notebook runs")
        assert "fill-unbounded" not in log and log.count("fill-stopped") == 4, log
        assert "a previous submission left files" not in log


def test_a_huge_notebook_is_analysed_once_within_bounds(batch):
    res = results(batch[0], "huge")
    assert "the check reads" in output_of(res, "uses only send and recv, in the halving-doubling")
    assert res["execution_time"] < 60


def test_symlinks_planted_where_results_once_lay_change_nothing(batch):
    out = batch[0]
    assert "linked out" in output_of(results(out, "links"), "Notebook runs")  # the grader reads no file of it
    assert (out / "gradebook.csv").read_text().startswith("submission,")


def test_a_student_cannot_forge_a_sandbox_failure(batch):
    res = results(batch[0], "forgestatus")
    assert res["scaleout"]["status"] != "error" and "could not build its sandbox" not in json.dumps(res)


def test_feedback_is_plain_text_so_student_output_cannot_inject_markup(batch):
    res = results(batch[0], "html")
    assert res["output_format"] == "text" and res["test_output_format"] == "text"
    assert "<script>" in output_of(res, "Notebook runs")  # shown verbatim, as text


def test_hostile_names_never_collide_with_each_other_or_the_gradebook(batch):
    out = batch[0]
    assert (out / "gradebook.csv").is_file() and (out / "gradebook.csv-2" / "results.json").is_file()
    assert results(out, "amy-3")["score"] == 100 and results(out, "amy-2")["score"] == 2.5  # nobody overwrote it


def test_student_code_has_no_network_not_even_the_graders_loopback(batch):
    log = output_of(results(batch[0], "net"), "Notebook runs")
    assert "net-blocked 127.0.0.1" in log and "net-blocked 1.1.1.1" in log and "net-open" not in log


@pytest.mark.parametrize("name,words", [("loop", "time limit"), ("forkbomb", "time limit"),
                                        ("membomb", "memory"), ("sysexit", "sys.exit"), ("osexit", "ended"),
                                        ("forgestatus", "ended"), ("flood", "more than 200000 messages or 256 MB"),
                                        ("missing", "no function named halving_doubling_allreduce"),
                                        ("wrongtype", "is a list; return a NumPy array"),
                                        ("malformed", "not a readable notebook"), ("print", "64 KB")])
def test_each_failure_explains_itself(batch, name, words):
    assert words in json.dumps(results(batch[0], name))


def test_no_result_echoes_hidden_test_source(batch):
    hidden = (ROOT / "grading" / "lab04-ring-allreduce" / "tests.py").read_text()
    secrets = [ln.strip() for ln in hidden.splitlines() if len(ln.strip()) > 30 and not ln.strip().startswith(("#", '"'))]
    for f in batch[0].glob("*/results.json"):
        text = f.read_text()
        assert not [s for s in secrets if s in text], f.parent.name


def test_fork_bomb_leaves_no_process_behind(batch):
    import fcntl
    import tempfile

    folder = Path(tempfile.gettempdir()) / "scaleout-grader-uids"
    for first in (UID_BASE, UID_BASE + 16):  # the blocks this batch used, unless another batch holds one now
        fd = os.open(folder / f"{first}.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue
        try:
            assert not uid_alive(first)
        finally:
            os.close(fd)
