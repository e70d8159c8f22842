"""Room on a disk a part writes to: checked before each write and before a stack starts.

Some writers die or lose data when their disk fills: the embedded vector store maps its
files into memory, and a mapped write to a full disk kills the process with SIGBUS (no log
line, every service of the process with it); the embedded broker, refused a write, tears
its log and loses what it acknowledges after. So each writer keeps a floor of free space:
below it a write is refused with :class:`~react_mem.errors.DiskFull` (nothing written,
nothing acknowledged), and writes go through again as soon as space is freed. A part that
starts below its floor stops at once with the reason (:meth:`DiskFloor.check_start`).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from react_mem.errors import ConfigurationError, DiskFull

MIB = 2**20


def existing(path: Path) -> Path:
    """``path``, or its nearest existing parent (a directory not made yet is on its disk)."""
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def free_bytes(path: Path) -> int:
    """Bytes an unprivileged writer may still use on the disk holding ``path``."""
    return shutil.disk_usage(existing(path)).free


def device(path: Path) -> int:
    """The disk (device id) holding ``path``: parts on one device share its free space."""
    return os.stat(existing(path)).st_dev


class DiskFloor:
    """``what`` writes under ``path`` only while at least ``min_free_mib`` MiB are free there
    (0: never checked); ``setting`` names the key that sets it, ``refused`` is called for
    each write refused (a metric)."""

    def __init__(
        self,
        what: str,
        path: Path,
        min_free_mib: int,
        *,
        setting: str = "min_free_disk_mib",
        refused: Callable[[], None] | None = None,
    ) -> None:
        self.what, self.path, self.min_free = what, path, min_free_mib * MIB
        self.setting, self._refused = setting, refused

    def free(self) -> int:
        return free_bytes(self.path)

    def low(self) -> bool:
        return bool(self.min_free) and self.free() < self.min_free

    def describe(self, free: int | None = None) -> str:
        free = self.free() if free is None else free
        return (
            f"{self.what}: the disk under {self.path} has {free / MIB:.1f} MiB free, below "
            f"{self.setting} ({self.min_free // MIB} MiB)"
        )

    def check_start(self, fresh: int = 0) -> None:
        """Refuse to start below the floor plus ``fresh`` bytes for a first start's files."""
        if not self.min_free or (free := self.free()) >= self.min_free + fresh:
            return
        made = f" plus {fresh / MIB:.0f} MiB for the files a first start makes" if fresh else ""
        raise ConfigurationError(
            f"{self.what}: the disk under {self.path} has {free / MIB:.1f} MiB free; it needs "
            f"{self.setting} ({self.min_free // MIB} MiB){made}: free space, or lower the setting"
        )

    def check_write(self) -> None:
        if self.min_free and (free := self.free()) < self.min_free:
            if self._refused is not None:
                self._refused()
            raise DiskFull(
                f"{self.describe(free)}: nothing was written; ask again once space is freed"
            )


@dataclass(frozen=True)
class DiskNeed:
    """What a part about to start needs under ``path``: ``fresh`` bytes for the files it
    makes on a first start (0 when they exist), then its floor (``floor`` bytes, set by
    ``setting``) kept free while it runs."""

    what: str
    path: Path
    fresh: int
    floor: int
    setting: str = "min_free_disk_mib"


def first_start(path: Path) -> bool:
    """Whether ``path`` holds nothing yet (a part starting there makes its files)."""
    return not path.is_dir() or not any(path.iterdir())


def preflight(needs: list[DiskNeed]) -> None:
    """Refuse to start, naming each short disk, what it holds and the MiB needed, when the
    parts sharing a disk need more than it has free: their first files together plus the
    largest floor among them. Parts of one process start at once, each seeing the same free
    space, so each part's own check at start cannot see what its neighbours are about to
    take (the embedded store's first files: tens of MiB, then SIGBUS when they do not fit)."""
    by_disk: dict[int, list[DiskNeed]] = {}
    for need in needs:
        by_disk.setdefault(device(need.path), []).append(need)
    short = []
    for group in by_disk.values():
        wanted = sum(n.fresh for n in group) + max(n.floor for n in group)
        free = free_bytes(group[0].path)
        if free < wanted:
            parts = ", ".join(
                f"{n.what} in {n.path} ({n.fresh / MIB:.0f} MiB to start"
                f"{f', {n.setting} {n.floor // MIB}' if n.floor else ''})"
                for n in group
            )
            short.append(
                f"the disk under {existing(group[0].path)} has {free / MIB:.1f} MiB free and "
                f"needs {wanted / MIB:.0f} MiB: {parts}"
            )
    if short:
        raise ConfigurationError(
            "not enough disk space to start: "
            + "; ".join(short)
            + ". Free space, give another --state-dir, or lower the settings named"
        )
