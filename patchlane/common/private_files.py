"""Files only this user (or root) can have written: the trust rule of everything patchlane reads
back from its own cache at start-up, the validated registry (:mod:`patchlane.registry.cache`)
and the lazy start's watch list (:mod:`patchlane.lazy.watchlist`). Both say which overlay files a
training job runs, so a file another user could plant is never read
(:mod:`patchlane.registry.cache` says why a data-only format would not change that).

Only ``os`` and ``stat`` at import: the lazy start checks its watch list with this in every
interpreter a job starts.
"""

import os
import stat

__all__ = ["file_kind", "open_regular", "prune", "read", "shared", "write"]


def file_kind(mode: int) -> str:
    """What a file of ``mode`` is, in words, when it is not a regular file: every reader that
    refuses one names what it found with this."""
    for test, name in ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISDIR, "a directory"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISLNK, "a symbolic link")):
        if test(mode):
            return name
    return "not a regular file" if not stat.S_ISREG(mode) else "a regular file"


def open_regular(file: "str | os.PathLike[str]", flags: int = 0) -> "tuple[int, os.stat_result]":
    """``(descriptor, its stat)`` of the regular file ``file``, opened read-only and without
    blocking (a FIFO would wait for a writer forever, a terminal become the controlling one),
    and checked on the open descriptor, so what is checked is what is read. ``flags`` adds to
    the open (``O_NOFOLLOW``). Anything but a regular file raises ``OSError(EINVAL)`` whose
    message names what it is (:func:`file_kind`); the descriptor is closed then. One way in
    for every reader of a file patchlane did not just write itself."""
    fd = os.open(file, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
                 | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0) | flags)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(22, f"is {file_kind(info.st_mode)}, not a regular file", str(file))
    except BaseException:
        os.close(fd)
        raise
    return fd, info


def _private_group(gid: int, uid: int) -> bool:
    """Whether ``gid`` is ``uid``'s own group: named as the user, the user's primary group,
    with no other member. Asked only for a directory its group can write."""
    try:
        import grp
        import pwd

        user = pwd.getpwuid(uid)
        group = grp.getgrgid(gid)
    except (ImportError, KeyError, OSError):
        return False
    return (user.pw_gid == gid and group.gr_name == user.pw_name
            and set(group.gr_mem) <= {user.pw_name})


def shared(real: str) -> str | None:
    """Why users other than this one (and root) could change what the directory ``real`` (a
    path without symlinks) holds, or None when they cannot. Raises OSError when it is
    missing.

    The directory and every directory above it must belong to this user or root and be
    writable by no one else; an ancestor with the sticky bit (``/tmp``) may be writable by all,
    since nobody can rename what another user owns in it. A directory writable by its group
    passes only when that group is the user's own private group (the rule Debian's OpenSSH
    applies to ``~/.ssh``)."""
    getuid = getattr(os, "getuid", None)
    if getuid is None:  # pragma: no cover - Windows: ACLs, not mode bits; not checked here
        return None
    uid = getuid()
    path, leaf = real, True
    while True:
        info = os.stat(path)
        if info.st_uid not in (uid, 0):
            return f"{path} belongs to another user (uid {info.st_uid})"
        mode = info.st_mode
        if mode & 0o022 and (leaf or not mode & stat.S_ISVTX) \
                and (mode & 0o002 or not _private_group(info.st_gid, uid)):
            return f"{path} can be written by other users (mode {stat.filemode(mode)})"
        parent = os.path.dirname(path)
        if parent == path:
            return None
        path, leaf = parent, False


def read(file: str, limit: int | None = None) -> bytes | None:
    """The bytes of ``file``, or None: missing, a symlink, not a regular file, linked
    elsewhere, not this user's, or writable by others. Opened without following a symlink
    (``O_NOFOLLOW``) and checked on the open descriptor, so what is checked is what is read.
    With ``limit``, at most its first ``limit`` bytes."""
    try:
        # O_NOFOLLOW: a symlink fails here (ELOOP)
        fd, info = open_regular(file, getattr(os, "O_NOFOLLOW", 0))
    except (OSError, ValueError):
        return None
    try:
        getuid = getattr(os, "getuid", None)
        if info.st_nlink != 1 or (
                getuid is not None and (info.st_uid != getuid() or info.st_mode & 0o022)):
            return None
        chunks = []
        left = limit if limit is not None else -1
        while left:
            chunk = os.read(fd, left if left > 0 else max(info.st_size + 1, 1 << 16))
            if not chunk:
                break
            chunks.append(chunk)
            left = max(0, left - len(chunk)) if left > 0 else left
        return b"".join(chunks)
    except (OSError, OverflowError, MemoryError):  # unreadable, or a limit it cannot honour
        return None
    finally:
        os.close(fd)


def write(file: str, data: bytes) -> None:
    """Replace ``file`` with ``data`` atomically (a reader gets the old file or the new one),
    as a file only this user can write: ``0600`` whatever was there before, so a file others
    could write is never kept, nor re-read (:func:`read` refuses it). Not fsynced: a cache
    lost to a crash is only a miss."""
    import tempfile

    folder, name = os.path.split(file)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{name}.", suffix=".tmp")  # 0600
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, file)
    except BaseException:
        try:  # noqa: SIM105 - contextlib costs ~3 ms to import; this module loads everywhere
            os.unlink(tmp)
        except OSError:
            pass
        raise


def prune(directory: str, suffix: str, keep: int, spare: str) -> None:
    """Remove the oldest files named ``*suffix`` in ``directory`` beyond ``keep`` (``spare``,
    the file just written, counts as kept and is never removed); another writer's temp file
    (a dot file) is left alone. What is already gone, or cannot be removed, is left be."""
    found = []
    with os.scandir(directory) as listing:
        for item in listing:
            if item.name.endswith(suffix) and not item.name.startswith(".") \
                    and item.path != spare:
                try:
                    found.append((item.stat(follow_symlinks=False).st_mtime_ns, item.path))
                except OSError:
                    continue
    found.sort()
    for _, stale in found[: max(0, len(found) + 1 - keep)]:
        try:  # noqa: SIM105 - contextlib costs ~3 ms to import; this module loads everywhere
            os.unlink(stale)
        except OSError:
            pass
