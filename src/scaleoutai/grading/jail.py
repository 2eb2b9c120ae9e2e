"""The sandbox's walls: namespaces, a new root built from an allowlist, a cgroup, the uid drop, rlimits.

``enter_jail`` runs as root in a freshly forked process and leaves it as pid 1 of its own PID
namespace, with its own mount, network, IPC and UTS namespaces, inside a new root that holds, read-only,
only the system libraries, the interpreter, the installed packages and the course library, plus a
private size-capped ``/tmp``, ``/var/tmp``, ``/dev/shm`` and working folder ``/home/student``. No course
repository, no other submission, no grader's home. Modules a lab forbids are covered by stubs that raise
ImportError. Then it drops to the slot's unprivileged uid and applies rlimits (grading/README.md).
"""
from __future__ import annotations

import ctypes
import os
import platform
import resource
import signal
import socket
import struct
import sys
from dataclasses import dataclass, field

CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
CLONE_NEWPID, CLONE_NEWNET = 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT = 1, 2, 4, 8, 32
MS_BIND, MS_REC, MS_PRIVATE, MNT_DETACH = 4096, 16384, 1 << 18, 2
PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS = 1, 38
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}
SYSTEM_DIRS = ("/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin")
ETC_FILES = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime", "/etc/nsswitch.conf")
DEVICES = ("null", "zero", "full", "random", "urandom")
HOME = "/home/student"  # the working folder inside the new root


@dataclass
class Limits:
    """What one submission may use. ``memory_mb`` is RLIMIT_AS per process (torch maps ~1 GB)."""

    timeout: float = 60.0
    memory_mb: int = 2048
    nproc: int = 128  # processes and threads of one uid, and of the submission's pids cgroup
    submission_mb: int = 2048  # resident memory of the submission as a whole: processes and its tmpfs
    fsize_mb: int = 64
    nofile: int = 256
    disk_mb: int = 256  # the submission's working folders together (tmpfs)
    tmp_mb: int = 64  # each of /tmp, /var/tmp, /dev/shm, per rank
    mode: str = "auto"  # "full": namespaces + new root + uid drop; "uid": uid drop only; "none"; "auto"
    unimportable: list[list[str]] = field(default_factory=list)  # [module, its file]: covered by a stub
    shared: str = ""  # a folder in every rank's working folder that all ranks share (a lab's checkpoints)


_libc = None


def libc() -> ctypes.CDLL:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
        _libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
        _libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
    return _libc


def check(rc: int, what: str) -> None:
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def mount(src: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    enc = lambda s: None if s is None else s.encode()  # noqa: E731
    check(libc().mount(enc(src), enc(target), enc(fstype), flags, enc(data)), f"mount {target}")


def umount(target: str) -> None:
    check(libc().umount2(target.encode(), MNT_DETACH), f"umount {target}")


def loopback_up() -> None:
    """A new network namespace has only ``lo``, and it is down: bring it up (SIOCSIFFLAGS)."""
    import fcntl

    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        req = struct.pack("16sH", b"lo", 0)
        flags = struct.unpack("16sH", fcntl.ioctl(s, 0x8913, req)[:18])[1]
        fcntl.ioctl(s, 0x8914, struct.pack("16sH", b"lo", flags | 0x1 | 0x40))  # IFF_UP | IFF_RUNNING
    finally:
        s.close()


def import_roots() -> list[str]:
    """The import path a sandbox gets: the standard library, installed packages and the course library,
    never the grader's working folder or a test folder."""
    import scaleoutai

    lib = os.path.dirname(os.path.dirname(os.path.abspath(scaleoutai.__file__)))
    prefixes = tuple({sys.base_prefix, sys.prefix, os.path.realpath(sys.base_prefix)})
    keep = []
    for p in sys.path:
        if p and os.path.isdir(p) and (p == lib or p.startswith(prefixes) or os.path.basename(p) in (
                "site-packages", "dist-packages")) and p not in keep:
            keep.append(os.path.abspath(p))
    return keep if lib in keep else [*keep, lib]


def module_file(name: str, roots: list[str]) -> str | None:
    """The file (or package folder) that ``import name`` would load from ``roots``, found without
    importing anything: importing a package to look inside it could run the code a lab forbids."""
    parts = name.split(".")
    for root in roots:
        base = os.path.join(root, *parts)
        if os.path.isdir(base) and os.path.isfile(os.path.join(base, "__init__.py")):
            return base
        if os.path.isfile(base + ".py"):
            return base + ".py"
    return None


def _bind_ro(src: str, dst: str) -> None:
    if os.path.isdir(src):
        os.makedirs(dst, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        if not os.path.exists(dst):
            open(dst, "w").close()
    mount(src, dst, None, MS_BIND | MS_REC)
    mount(None, dst, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)


def _tmpfs(dst: str, mb: int, mode: str = "1777") -> None:
    os.makedirs(dst, exist_ok=True)
    mount("tmpfs", dst, "tmpfs", MS_NOSUID | MS_NODEV, f"mode={mode},size={mb}m")


def _stub(root: str, module: str, target: str, n: int) -> None:
    """Cover ``target`` (the file or package folder of ``module``) so that importing it raises ImportError."""
    name = os.path.splitext(os.path.basename(target))[0]
    why = (f"{module} is not available while this lab is graded: it holds or imports the course library's "
           f"answer to this lab, which asks you to write that part yourself")
    text = f"raise ImportError({why!r}, name={module!r})\n"
    if os.path.isdir(target):
        _tmpfs(root + target, 1, "0755")
        with open(os.path.join(root + target, "__init__.py"), "w") as f:
            f.write(text)
        mount(None, root + target, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, "mode=0755")
        return
    stub = os.path.join(root, ".stubs", f"{n}.py")
    with open(stub, "w") as f:
        f.write(text)
    mount(stub, root + target, None, MS_BIND)
    cache = os.path.join(os.path.dirname(target), "__pycache__")
    if os.path.isdir(cache):  # a cached .pyc would still hold the real code
        for pyc in os.listdir(cache):
            if pyc.startswith(name + "."):
                mount(stub, root + os.path.join(cache, pyc), None, MS_BIND)


def build_root(root: str, work: str, roots: list[str], limits: Limits) -> None:
    """Mount the allowlisted tree at ``root`` (an empty folder in a private mount namespace)."""
    mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=4m")
    for d in ("/tmp", "/var/tmp"):  # first: an import root under /tmp is then bound inside it, not hidden
        _tmpfs(root + d, limits.tmp_mb)
    for d in SYSTEM_DIRS:
        if os.path.islink(d):
            os.symlink(os.readlink(d), root + d)
        elif os.path.isdir(d):
            _bind_ro(d, root + d)
    for f in ETC_FILES:
        if os.path.exists(f):
            _bind_ro(f, root + f)
    bound = [d for d in SYSTEM_DIRS if os.path.isdir(d) and not os.path.islink(d)]
    for p in sorted(set(roots)):
        real = os.path.realpath(p)
        if not any(real == b or real.startswith(b + os.sep) for b in bound):
            _bind_ro(real, root + real)
            bound.append(real)
            if real != p and not os.path.lexists(root + p):
                os.makedirs(os.path.dirname(root + p), exist_ok=True)
                os.symlink(real, root + p)
    _tmpfs(root + "/dev", 1, "0755")
    for dev in DEVICES:
        open(f"{root}/dev/{dev}", "w").close()
        mount(f"/dev/{dev}", f"{root}/dev/{dev}", None, MS_BIND)
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"),
                         ("stderr", "/proc/self/fd/2")):
        os.symlink(target, f"{root}/dev/{name}")
    _tmpfs(root + "/dev/shm", limits.tmp_mb)
    os.makedirs(root + "/proc")
    os.makedirs(root + HOME)  # fails loudly if an import root sits there: never cover one
    mount(work, root + HOME, None, MS_BIND | MS_REC)  # with the shared folder bound inside it
    os.makedirs(root + "/.stubs")
    for n, (module, target) in enumerate(limits.unimportable):
        _stub(root, module, target, n)
    mount(None, root + "/dev", None, MS_REMOUNT | MS_RDONLY | MS_NOSUID, "mode=0755")


def pivot(root: str) -> None:
    """Make ``root`` the filesystem root and drop every path to the old one."""
    nr = SYS_PIVOT_ROOT.get(platform.machine())
    if nr is None:
        raise OSError(f"pivot_root is not known on {platform.machine()}")
    os.chdir(root)
    check(libc().syscall(nr, b".", b"."), "pivot_root")
    umount(".")
    os.chdir("/")
    mount(None, "/", None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, "mode=0755")
    mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)


def unshare_all() -> None:
    check(libc().unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWPID), "unshare")


def enter_jail(root: str, work: str, uid: int, roots: list[str], limits: Limits) -> None:
    """In the first process of a new PID namespace (see ``unshare_all``): walls, then the uid drop."""
    if limits.mode == "full":
        mount(None, "/", None, MS_REC | MS_PRIVATE)
        build_root(root, work, roots, limits)
        pivot(root)
        loopback_up()
        work = HOME
        sys.path[:] = [p for p in sys.path if p in roots]
    if limits.mode in ("full", "uid"):
        os.setgroups([])
        os.setresgid(65534, 65534, 65534)
        os.setresuid(uid, uid, uid)
    libc().prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    libc().prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # after the uid change, which clears it
    mb = 1 << 20
    for lim, val in ((resource.RLIMIT_AS, limits.memory_mb * mb), (resource.RLIMIT_FSIZE, limits.fsize_mb * mb),
                     (resource.RLIMIT_NPROC, limits.nproc), (resource.RLIMIT_NOFILE, limits.nofile),
                     (resource.RLIMIT_CORE, 0)):
        resource.setrlimit(lim, (val, val))
    cpu = int(limits.timeout) + 5
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 5))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the cap fails with EFBIG, no kill
    os.chdir(work)
    os.environ.clear()
    os.environ.update({"HOME": work, "TMPDIR": "/tmp" if limits.mode == "full" else work, "PATH": "/usr/bin:/bin",
                       "LANG": "C.UTF-8", "OMP_NUM_THREADS": "1", "MPLBACKEND": "Agg",
                       "TORCH_CPP_LOG_LEVEL": "ERROR", "PYTHONDONTWRITEBYTECODE": "1"})


def is_root() -> bool:
    return os.geteuid() == 0


def probe_mode() -> str:
    """The strongest isolation this machine allows: "full" (root, namespaces), "uid" (root), "none"."""
    if not is_root():
        return "none"
    pid = os.fork()
    if pid == 0:
        try:
            unshare_all()
            mount(None, "/", None, MS_REC | MS_PRIVATE)
            mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "size=4k")
            loopback_up()
        except BaseException:  # noqa: BLE001
            os._exit(1)
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    return "full" if os.waitstatus_to_exitcode(status) == 0 else "uid"


def kill_uid(uid: int) -> None:
    """SIGKILL every process of ``uid``: a helper that becomes ``uid`` calls kill(-1, SIGKILL)."""
    if not is_root():
        return
    for _ in range(5):
        pid = os.fork()
        if pid == 0:
            try:
                os.setresuid(uid, uid, uid)
                os.kill(-1, signal.SIGKILL)
            except OSError:
                pass
            os._exit(0)
        os.waitpid(pid, 0)
        if not uid_alive(uid):
            return


def uid_alive(uid: int) -> bool:
    """Whether a live (non-zombie) process of ``uid`` exists."""
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                if os.stat(f"/proc/{d}").st_uid == uid:
                    with open(f"/proc/{d}/stat") as f:
                        if f.read().rsplit(")", 1)[1].split()[0] != "Z":
                            return True
            except (OSError, IndexError):
                pass
    return False
