"""Who holds a session's lease: host, process and process start, so a dead local holder is seen at once.

A lease row names its holder as ``host|pid|start|nonce``. ``host`` is the machine (hostname, kernel boot id
and PID namespace, so two containers or a reboot never look like one host), ``start`` the process's start
time in clock ticks since boot (from ``/proc``), so a new process that got a dead worker's pid is not taken
for it. A worker on the same host can then tell that a holder is dead (no such process, a zombie, or
another process under that pid) and take its session over without waiting for the lease to expire; a
holder on another host is only ever taken over after its lease expired.

``AI_UTILS_HOST_ID`` replaces the host part (tests simulate a second machine with it; a deployment whose
hosts share hostname, boot id and PID namespace can set it per host).
"""

from __future__ import annotations

import functools
import os
import socket
import time
import uuid
from dataclasses import dataclass

__all__ = ["HOST_ENV", "Holder", "host_id", "this_holder"]

HOST_ENV = "AI_UTILS_HOST_ID"
_SEP = "|"
# When a holder of this host was last seen alive (`Holder.dead_here` with ``seen_within``).
_alive: dict[tuple[int, str], float] = {}


def _read(path: str) -> str:
    # os.open/os.read, not Path.read_text: no TextIOWrapper for a few hundred bytes, read on every wait's wake-up.
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return ""
    try:
        return os.read(fd, 4096).decode(errors="replace").strip()
    except OSError:
        return ""
    finally:
        os.close(fd)


def _stat(pid: int) -> tuple[str, str] | None:
    """``(state, start time in clock ticks)`` of a process from ``/proc/<pid>/stat``, ``None`` without one."""
    text = _read(f"/proc/{pid}/stat")
    # The command name (field 2) is in parentheses and may hold spaces: split after its closing one.
    _, paren, rest = text.rpartition(")")
    fields = rest.split()
    if not paren or len(fields) < 20:
        return None
    return fields[0], fields[19]


def host_id() -> str:
    """This machine's identity in lease rows (``AI_UTILS_HOST_ID`` when set)."""
    given = os.environ.get(HOST_ENV, "").strip()
    if given:
        return given.replace(_SEP, "/")
    return _machine()


@functools.cache
def _machine() -> str:
    boot = _read("/proc/sys/kernel/random/boot_id")
    try:
        namespace = os.readlink("/proc/self/ns/pid")
    except OSError:
        namespace = ""
    return "/".join(p for p in (socket.gethostname().replace(_SEP, "/"), boot, namespace) if p)


@dataclass(frozen=True)
class Holder:
    """A lease holder: ``host|pid|start|nonce`` in the row."""

    host: str
    pid: int
    start: str
    nonce: str

    def __str__(self) -> str:
        return _SEP.join((self.host, str(self.pid), self.start, self.nonce))

    @classmethod
    def parse(cls, owner: object) -> Holder | None:
        """The holder a lease row names, or ``None`` for none (or one an older version wrote)."""
        if not isinstance(owner, str):
            return None
        parts = owner.rsplit(_SEP, 3)
        if len(parts) != 4 or not parts[1].isdigit():
            return None
        return cls(parts[0], int(parts[1]), parts[2], parts[3])

    def dead_here(self, *, seen_within: float = 0.0) -> bool:
        """Whether this holder is a process on this host that no longer runs (a zombie counts as dead).

        ``seen_within``: a holder this process saw alive that many seconds ago or less counts as alive without looking
        again. For a waiter that asks on every wake-up: with hundreds of sessions waiting on a handful of holders,
        reading ``/proc`` each time cost a tenth of a busy worker's runner thread.
        """
        if self.host != host_id():
            return False
        if self.pid == os.getpid():
            return self.start != _own_start(self.pid)  # our pid, another (earlier) process
        key = (self.pid, self.start)
        now = time.monotonic()
        seen = _alive.get(key)
        if seen_within > 0 and seen is not None and now - seen <= seen_within:  # 0: always look
            return False
        dead = self._dead_now()
        if dead:
            _alive.pop(key, None)
        else:
            if len(_alive) > 1024:  # holders come and go: keep only the recent ones
                _alive.clear()
            _alive[key] = now
        return dead

    def _dead_now(self) -> bool:
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            pass  # it exists, under another user
        stat = _stat(self.pid)
        if stat is None:
            return False  # no /proc: the pid alone says it runs
        state, start = stat
        return state in ("Z", "X") or (bool(self.start) and start != self.start)


def _start_of(pid: int) -> str:
    stat = _stat(pid)
    return stat[1] if stat else ""


@functools.lru_cache(maxsize=4)
def _own_start(pid: int) -> str:
    """This process's start (keyed by pid: a forked child reads its own); asked on every prompt to a held session."""
    return _start_of(pid)


def this_holder() -> Holder:
    """This process as a lease holder (a new nonce per call: each store object is its own worker)."""
    return Holder(host_id(), os.getpid(), _own_start(os.getpid()), uuid.uuid4().hex[:8])
