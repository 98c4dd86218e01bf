"""Test-only: every connection a process (and each it starts) tries to a host that is not
this machine is recorded and refused: the proof that a night used no network."""
import os
import socket

_LOG = os.environ.get("NETGUARD_LOG")
_LOCAL = {"localhost", "127.0.0.1", "::1", "0.0.0.0", ""}


def _note(what):
    if _LOG:
        with open(_LOG, "a", encoding="utf-8") as fh:
            fh.write(f"{os.getpid()} {what}\n")


def _local(address):
    if not isinstance(address, tuple):
        return True  # AF_UNIX
    host = str(address[0])
    return host in _LOCAL or host.startswith("127.") or host == socket.gethostname()


_connect = socket.socket.connect
_connect_ex = socket.socket.connect_ex
_getaddrinfo = socket.getaddrinfo


def connect(self, address):
    if not _local(address):
        _note(f"connect {address!r}")
        raise OSError(101, f"network blocked by the test: {address!r}")
    return _connect(self, address)


def connect_ex(self, address):
    if not _local(address):
        _note(f"connect_ex {address!r}")
        return 101
    return _connect_ex(self, address)


def getaddrinfo(host, *args, **kwargs):
    if host is not None and not _local((host,)):
        _note(f"getaddrinfo {host!r}")
        raise socket.gaierror(-2, f"name resolution blocked by the test: {host!r}")
    return _getaddrinfo(host, *args, **kwargs)


socket.socket.connect = connect
socket.socket.connect_ex = connect_ex
socket.getaddrinfo = getaddrinfo
