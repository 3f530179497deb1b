"""Landlock, the kernel's unprivileged file-system (and TCP, and signal) confinement, through its three syscalls.

No maintained Python binding exists (the `landlock` package is a development release), and the interface
is three syscalls and two structs, so this module speaks to the kernel directly with ctypes. Rights are
chosen by ABI version: a right the running kernel does not know is left out rather than refused.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Iterable
from pathlib import Path

_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446  # the same numbers on x86-64 and arm64
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38

EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
READ_ONLY = EXECUTE | READ_FILE | READ_DIR
_FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | (1 << 14) | (1 << 15)  # + truncate (v3), ioctl on devices (v5)
_RIGHTS_BY_ABI = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 5: (1 << 16) - 1}
_NET_BIND_TCP, _NET_CONNECT_TCP = 1, 2  # ABI 4
_SCOPE_ABSTRACT_UNIX, _SCOPE_SIGNAL = 1, 2  # ABI 6


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]  # fmt: skip


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def _syscall(number: int, *arguments: object) -> int:
    result = int(_libc.syscall(ctypes.c_long(number), *arguments))
    if result < 0:
        error = ctypes.get_errno()
        raise OSError(error, f"landlock syscall {number}: {os.strerror(error)}")
    return result


def abi_version() -> int:
    """The kernel's Landlock ABI version; 0 when Landlock is absent or disabled."""
    try:
        return _syscall(_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION))
    except OSError:
        return 0


def handled_fs_rights(abi: int) -> int:
    return next((rights for version, rights in sorted(_RIGHTS_BY_ABI.items(), reverse=True) if abi >= version), 0)


def prepare(read_only: Iterable[Path], read_write: Iterable[Path]) -> tuple[int, int]:
    """A ruleset allowing reads under `read_only` and everything under `read_write`: `(fd, abi)`.

    Outside those trees every file-system right the kernel knows is denied; from ABI 4 on TCP bind and
    connect are denied, and from ABI 6 on signals to processes outside the domain are denied too. The
    paths are opened now, so prepare before dropping privileges that may be needed to reach them.
    """
    abi = abi_version()
    handled = handled_fs_rights(abi)
    ruleset = _create_ruleset(handled, abi)
    try:
        for path, rights in [*((p, READ_ONLY) for p in read_only), *((p, handled) for p in read_write)]:
            _allow(ruleset, path, rights & handled)
    except BaseException:
        os.close(ruleset)
        raise
    return ruleset, abi


def read_only_and_alone() -> int:
    """Add a layer that denies every write anywhere and, from ABI 6, signals and abstract sockets beyond it.

    Stacked on a process already confined by `prepare`/`enforce`: reads stay as that layer allows. Each
    episode process adds its own, so its domain holds only itself: it can write nowhere another process
    reads, and cannot signal its zygote or a sibling. Returns the ABI version.
    """
    abi = abi_version()
    enforce(_create_ruleset(handled_fs_rights(abi) & ~READ_ONLY, abi))
    return abi


def _create_ruleset(handled_fs: int, abi: int) -> int:
    """A ruleset handling `handled_fs`, TCP bind and connect (ABI 4), and signal and abstract-socket scope
    (ABI 6); every handled right is denied until a rule allows it."""
    if abi < 1:
        raise OSError("landlock is not available in this kernel")
    attr = _RulesetAttr(
        handled_access_fs=handled_fs,
        handled_access_net=(_NET_BIND_TCP | _NET_CONNECT_TCP) if abi >= 4 else 0,
        scoped=(_SCOPE_ABSTRACT_UNIX | _SCOPE_SIGNAL) if abi >= 6 else 0,
    )
    return _syscall(_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(ctypes.sizeof(attr)), ctypes.c_uint32(0))


def enforce(ruleset: int) -> None:
    """Confine this process, and all it may start, to the ruleset. Irreversible."""
    try:
        if _libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
        _syscall(_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0))
    finally:
        os.close(ruleset)


def _allow(ruleset: int, path: Path, rights: int) -> None:
    try:
        descriptor = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except FileNotFoundError:
        return
    try:
        if not path.is_dir():
            rights &= _FILE_RIGHTS
        rule = _PathBeneath(allowed_access=rights, parent_fd=descriptor)
        _syscall(
            _ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(_RULE_PATH_BENEATH), ctypes.byref(rule), ctypes.c_uint32(0)
        )
    finally:
        os.close(descriptor)
