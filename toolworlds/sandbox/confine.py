"""The layers a sandbox worker puts around itself before it runs any untrusted code.

Each layer is applied if this machine and this user allow it, and the worker reports which ones held:
root gets all of them; an unprivileged user gets what the kernel lets it have (a user namespace for the
network, Landlock, seccomp and rlimits need no privilege). Order matters: namespaces and rlimits while we
may still set them, then the uid drop, then Landlock, then seccomp last, because its filter also forbids
the calls the earlier layers make.
"""

from __future__ import annotations

import ctypes
import errno
import os
import resource
import sys
import sysconfig
from dataclasses import dataclass, field
from pathlib import Path

from toolworlds.sandbox import landlock

NOBODY = 65534
_CLONE_NEWUSER, _CLONE_NEWNET, _CLONE_THREAD = 0x10000000, 0x40000000, 0x00010000
_PR_SET_PDEATHSIG, _PR_SET_DUMPABLE = 1, 4
_libc = ctypes.CDLL(None, use_errno=True)


@dataclass(frozen=True)
class Limits:
    """Resource limits of every sandbox process (bytes, seconds, counts); `processes` binds episodes only."""

    address_space: int = 1 << 30
    cpu_seconds: int = 3600  # a lifetime backstop; the parent's per-call deadlines are what stop a hang
    open_files: int = 64
    file_size: int = 16 << 20
    processes: int = 0


@dataclass
class Confinement:
    """Which layers hold in a sandbox process, and why a missing one is missing: reported at pool start-up."""

    layers: dict[str, str] = field(default_factory=dict)
    missing: dict[str, str] = field(default_factory=dict)

    def held(self, layer: str, detail: str = "on") -> None:
        self.layers[layer] = detail

    def lacked(self, layer: str, reason: str) -> None:
        self.missing[layer] = reason


def confine(workdir: Path, limits: Limits, parent: int) -> Confinement:
    """Confine the zygote with every layer available; irreversible. `workdir` is its only writable place.

    The zygote never runs world code; it keeps the right to fork (and to hand a socket to the pool), which
    `confine_episode` takes away from each episode process before any world code runs there.
    """
    report = Confinement()
    _die_with_parent(parent)
    _rlimits(limits, report)
    _network_namespace(report)
    ruleset = _prepare_filesystem(workdir, report)  # needs the paths still reachable: before the uid drop
    _drop_privileges(workdir, report)
    _die_with_parent(parent)  # a credential change clears the parent-death signal; set it again
    _no_core_no_ptrace(report)
    _enforce_filesystem(ruleset, report)
    _seccomp(report)
    return report


def confine_episode(limits: Limits, zygote: Confinement, parent: int) -> Confinement:
    """Add the episode's own layers in a freshly forked child of the zygote, before any world code runs.

    On top of everything inherited: no process of its own (rlimit and seccomp), no write anywhere, and a
    Landlock domain of its own, so no signal or abstract socket reaches past it.
    """
    report = Confinement(dict(zygote.layers), dict(zygote.missing))
    _die_with_parent(parent)  # a fork clears the parent-death signal
    _set_rlimit(report, "processes", resource.RLIMIT_NPROC, limits.processes)  # the rest are inherited
    try:
        abi = landlock.read_only_and_alone()
        report.held("landlock", f"{report.layers.get('landlock', 'ABI ' + str(abi))}; episode: no writes, alone")
    except OSError as error:
        report.lacked("landlock episode layer", str(error))
    _episode_seccomp(report)
    return report


def _die_with_parent(parent: int) -> None:
    _libc.prctl(_PR_SET_PDEATHSIG, 9, 0, 0, 0)
    if os.getppid() != parent:  # the parent died before the signal was armed
        os._exit(1)


def _rlimits(limits: Limits, report: Confinement) -> None:
    _set_rlimit(report, "address space", resource.RLIMIT_AS, limits.address_space)
    _set_rlimit(report, "cpu", resource.RLIMIT_CPU, limits.cpu_seconds)
    _set_rlimit(report, "open files", resource.RLIMIT_NOFILE, limits.open_files)
    _set_rlimit(report, "file size", resource.RLIMIT_FSIZE, limits.file_size)
    _set_rlimit(report, "core", resource.RLIMIT_CORE, 0)


def _set_rlimit(report: Confinement, name: str, which: int, value: int) -> None:
    try:
        resource.setrlimit(which, (value, value))
        report.held(f"rlimit {name}", str(value))
    except (ValueError, OSError) as error:
        report.lacked(f"rlimit {name}", str(error))


def _unshare(flags: int) -> None:
    if _libc.unshare(flags) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))


def _network_namespace(report: Confinement) -> None:
    """A new network namespace has only a downed loopback: no route anywhere, not even to this host."""
    try:
        _unshare(_CLONE_NEWNET)
        report.held("network namespace")
        return
    except OSError as error:
        if os.geteuid() == 0:
            report.lacked("network namespace", str(error))
            return
    try:  # an unprivileged user may own a user namespace, and a network namespace inside it
        _unshare(_CLONE_NEWUSER | _CLONE_NEWNET)
        report.held("network namespace", "inside a new user namespace")
    except OSError as error:
        report.lacked("network namespace", f"user namespaces refused: {error}")


def _drop_privileges(workdir: Path, report: Confinement) -> None:
    if os.geteuid() != 0:
        report.held("unprivileged user", str(os.geteuid()))
        return
    try:
        os.chown(workdir, NOBODY, NOBODY)
        os.setgroups([])
        os.setresgid(NOBODY, NOBODY, NOBODY)
        os.setresuid(NOBODY, NOBODY, NOBODY)
        report.held("unprivileged user", f"root dropped to {NOBODY}")
    except OSError as error:
        report.lacked("unprivileged user", str(error))


def _no_core_no_ptrace(report: Confinement) -> None:
    if _libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) == 0:
        report.held("not dumpable")


def readable_trees() -> list[Path]:
    """Where the interpreter and the loaded packages live: what imports need, and nothing else of the host.

    Packages count by their own directory (or file), never by the `sys.path` entry holding them, which
    for a source checkout is the whole project.
    """
    paths = {Path(sysconfig.get_path(name)) for name in ("stdlib", "platstdlib", "purelib", "platlib")}
    paths |= {Path(sys.prefix), Path(sys.base_prefix), Path(sys.executable).resolve().parent}
    for module in list(sys.modules.values()):
        location = getattr(module, "__file__", None)
        if location and "." not in module.__name__:
            path = Path(location)
            paths.add(path.parent if path.name == "__init__.py" else path)
    return sorted(paths)


def _prepare_filesystem(workdir: Path, report: Confinement) -> tuple[int, int] | None:
    try:
        return landlock.prepare(read_only=readable_trees(), read_write=[workdir])
    except OSError as error:
        report.lacked("landlock", str(error))
        return None


def _enforce_filesystem(ruleset: tuple[int, int] | None, report: Confinement) -> None:
    if ruleset is None:
        return
    descriptor, abi = ruleset
    try:
        landlock.enforce(descriptor)
        report.held("landlock", f"ABI {abi}: read-only interpreter and packages, writes only in the work dir")
    except OSError as error:
        report.lacked("landlock", str(error))


# Everything here fails with EPERM in every sandbox process: no sockets, no new programs, no signals to
# others, no tracing, no mounts or namespaces, no kernel modules, no io_uring (which bypasses seccomp), and
# none of the kernel objects two processes of one user could meet in (System V and POSIX IPC, file locks,
# file-change notifications, page-cache residency).
DENIED_SYSCALLS = (
    "socket", "connect", "bind", "listen", "accept", "accept4", "sendto", "sendmmsg",
    "execve", "execveat", "ptrace", "process_vm_readv", "process_vm_writev", "kill", "tkill",
    "pidfd_send_signal", "pidfd_getfd", "rt_sigqueueinfo", "rt_tgsigqueueinfo", "mount", "umount2", "unshare",
    "setns", "pivot_root", "chroot", "reboot", "kexec_load", "init_module", "finit_module", "delete_module", "bpf",
    "perf_event_open", "keyctl", "add_key", "request_key", "userfaultfd", "io_uring_setup", "io_uring_enter",
    "io_uring_register", "personality", "setuid", "setgid", "setreuid", "setregid", "setresuid", "setresgid",
    "setgroups", "mknod", "mknodat", "shmget", "shmat", "shmctl", "shmdt", "msgget", "msgsnd", "msgrcv", "msgctl",
    "semget", "semop", "semtimedop", "semctl", "mq_open", "mq_unlink", "mq_timedsend", "mq_timedreceive",
    "mq_notify", "mq_getsetattr", "flock", "inotify_init", "inotify_init1", "inotify_add_watch", "fanotify_init",
    "fanotify_mark", "mincore", "kcmp", "process_madvise", "migrate_pages", "move_pages", "ioprio_set",
)  # fmt: skip
# Only the zygote forks and hands an episode's socket to the pool; an episode process may do none of it.
EPISODE_DENIED_SYSCALLS = ("fork", "vfork", "socketpair", "sendmsg", "pidfd_open", "seccomp")
# fcntl commands that take locks, lease files, watch directories or aim signals at other processes.
_FCNTL_DENIED = {"F_GETLK": 5, "F_SETLK": 6, "F_SETLKW": 7, "F_SETOWN": 8, "F_SETSIG": 10,
                 "F_SETOWN_EX": 15, "F_OFD_GETLK": 36, "F_OFD_SETLK": 37, "F_OFD_SETLKW": 38,
                 "F_SETLEASE": 1024, "F_NOTIFY": 1026}  # fmt: skip
# Calls that name a process in argument 0 (1 for setpriority): allowed on this process only (0).
_SELF_ONLY = {"prlimit64": 0, "sched_setaffinity": 0, "sched_setscheduler": 0, "sched_setparam": 0,
              "sched_setattr": 0, "setpriority": 1}  # fmt: skip


def preload_seccomp() -> str:
    """Import the libseccomp binding while the interpreter's files are still readable; '' or why not."""
    try:
        import pyseccomp  # noqa: F401
    except (ImportError, OSError) as error:  # OSError: the libseccomp shared library itself is missing
        return str(error)
    return ""


def _seccomp(report: Confinement) -> None:
    """The zygote's filter: everything in `DENIED_SYSCALLS`; it may still fork and hand over sockets."""
    pyseccomp = sys.modules.get("pyseccomp")
    if pyseccomp is None:
        report.lacked("seccomp", f"libseccomp unavailable: {preload_seccomp()}")
        return
    try:
        rules = pyseccomp.SyscallFilter(pyseccomp.ALLOW)
        for name in DENIED_SYSCALLS:
            rules.add_rule(pyseccomp.ERRNO(errno.EPERM), name)
        for command in _FCNTL_DENIED.values():
            rules.add_rule(pyseccomp.ERRNO(errno.EPERM), "fcntl", pyseccomp.Arg(1, pyseccomp.EQ, command))
        for name, argument in _SELF_ONLY.items():
            rules.add_rule(pyseccomp.ERRNO(errno.EPERM), name, pyseccomp.Arg(argument, pyseccomp.NE, 0))
        # clone3 hides its flags in memory a filter cannot read, so it reports "not implemented" and the C
        # library falls back to clone, whose flags the episode filter can check.
        rules.add_rule(pyseccomp.ERRNO(errno.ENOSYS), "clone3")
        rules.load()
        patterns = len(_FCNTL_DENIED) + len(_SELF_ONLY)
        report.held("seccomp", f"{len(DENIED_SYSCALLS) + 1} system calls and {patterns} argument patterns denied")
    except OSError as error:
        report.lacked("seccomp", str(error))


def _episode_seccomp(report: Confinement) -> None:
    """A second filter on top of the zygote's: no processes (threads only), no hand-overs, signals to self."""
    pyseccomp = sys.modules.get("pyseccomp")
    if pyseccomp is None:
        return  # the zygote already reported why
    try:
        rules = pyseccomp.SyscallFilter(pyseccomp.ALLOW)
        for name in EPISODE_DENIED_SYSCALLS:
            rules.add_rule(pyseccomp.ERRNO(errno.EPERM), name)
        no_thread = pyseccomp.Arg(0, pyseccomp.MASKED_EQ, _CLONE_THREAD, 0)
        rules.add_rule(pyseccomp.ERRNO(errno.EPERM), "clone", no_thread)
        rules.add_rule(pyseccomp.ERRNO(errno.EPERM), "tgkill", pyseccomp.Arg(0, pyseccomp.NE, os.getpid()))
        rules.load()
        report.held("seccomp", f"{report.layers.get('seccomp', '')}; episode: no processes, signals to itself only")
    except OSError as error:
        report.lacked("seccomp", f"the episode filter: {error}")
