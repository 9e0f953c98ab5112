"""Atomic file writes: a reader (another worker, a resumed sweep, a report) sees the old file or
the whole new one, never a part; a write that fails leaves no temporary behind."""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path


@contextlib.contextmanager
def atomic_path(path: Path, *, suffix: str = ".tmp", fsync: bool = False):
    """Yield a temporary path beside ``path`` (``.<name>.<pid><suffix>``) to write to; it replaces
    ``path`` when the block ends without error (after an fsync if asked: it then survives a crash
    of the machine, not only of the process) and is removed otherwise."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}{suffix}")
    try:
        yield tmp
        if fsync:
            with open(tmp, "rb") as f:
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_text_atomic(path: Path, text: str, *, fsync: bool = False) -> None:
    """``path.write_text(text)`` (UTF-8), atomically."""
    with atomic_path(path, fsync=fsync) as tmp:
        tmp.write_text(text, encoding="utf-8")


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a folder"), (stat.S_ISLNK, "a symbolic link"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISFIFO, "a named pipe"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def check_output(path: str | Path, *, folder: bool = False) -> None:
    """Raise a ValueError naming ``path`` unless it can be written by :func:`atomic_path` (a file)
    or filled with files (``folder=True``) without replacing anything else: a file output must be a
    regular file or a new path (never a device, a folder, a link or a pipe: the atomic rename would
    replace it), a folder output an existing folder or a new path; and the nearest existing folder
    must take a new file (tried with a temporary, so a read-only folder or disk fails here, before
    any work). Creates nothing that stays."""
    path = Path(path)
    try:
        mode = path.lstat().st_mode
    except (FileNotFoundError, NotADirectoryError):  # a new path (or one under a file: said below)
        mode = None
    if mode is not None:
        if folder and not stat.S_ISDIR(mode):
            raise ValueError(f"{path}: {_kind(mode) if not stat.S_ISREG(mode) else 'a file'}; allowed: a "
                             "folder or a new path (the report's CSV tables go there)")
        if not folder and not stat.S_ISREG(mode):
            what = _kind(mode)
            if stat.S_ISLNK(mode):
                what += f" (to {os.readlink(path)}); give the file it points to"
            raise ValueError(f"{path}: {what}; allowed: a regular file or a new path")
        if not folder and not os.access(path, os.W_OK):
            raise ValueError(f"{path}: a read-only file; allowed: a writable file or a new path")
    where = path if folder and mode is not None else path.parent
    while not where.exists() and where != where.parent:  # created when written
        where = where.parent
    if not where.is_dir():
        raise ValueError(f"{path}: {where} is not a folder; allowed: a path in a folder")
    probe = where / f".{path.name}.{os.getpid()}.tmp"  # what atomic_path writes (a crash leaves it stale)
    try:
        probe.open("w").close()
    except OSError as err:
        raise ValueError(f"{path}: cannot write in {where} ({err.strerror})") from None
    probe.unlink()


def remove_stale_temporaries(folder: Path, names=None) -> int:
    """Remove the temporaries :func:`atomic_path` left in ``folder`` (``.<name>.<pid>.tmp``; only
    those of ``names``, if given) whose writing process is gone: a killed run's leftovers, never
    a live writer's. Returns how many it removed."""
    n = 0
    for tmp in Path(folder).glob(".*.tmp"):
        name, _, pid = tmp.name[1:-len(".tmp")].rpartition(".")
        if (names is not None and name not in names) or (pid.isdigit() and _alive(int(pid))):
            continue
        tmp.unlink(missing_ok=True)
        n += 1
    return n


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


class TextFileError(ValueError):
    """A file that cannot be read as UTF-8 text, with its path in the message."""


def read_text_file(path: str | Path) -> str:
    """The UTF-8 text of ``path``, without a leading byte-order mark (editors on Windows write
    one; TOML and INI parsers reject it); a file that is not UTF-8 is a :class:`TextFileError`
    naming the file and the first offending byte (OSErrors, e.g. a missing file, pass through).
    Every input file asicsim reads (TOML, SCALE-Sim cfg and CSV) is read here."""
    path = Path(path)
    data = path.read_bytes()
    try:
        return data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as err:
        raise TextFileError(f"{path}: not UTF-8 text (byte 0x{data[err.start]:02x} at offset "
                            f"{err.start}); save it as UTF-8") from None


def beside(value, folder: str | Path | None):
    """``value`` resolved against ``folder`` when it is a relative path to a ``.toml`` (or
    SCALE-Sim ``.cfg``) file: a file named inside another file (a design's formats, a block
    format's element, a sweep spec's recipes, designs and workloads) is relative to that file's
    folder, not to the current one. Anything else (a catalog name, an absolute path, a table), or
    any value where ``folder`` is None (a table built in code), is returned unchanged."""
    if (folder is not None and isinstance(value, str) and value.endswith((".toml", ".cfg"))
            and not Path(value).is_absolute()):
        return str(Path(folder) / value)
    return value
