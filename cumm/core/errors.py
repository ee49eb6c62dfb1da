"""Exceptions raised by cumm. All derive from the built-in type a user would expect to catch."""

from __future__ import annotations


class ConfigError(ValueError):
    """A configuration names an unknown parameter, gives a bad value or violates a constraint."""


class SharedMemoryError(ValueError):
    """A configuration needs more shared memory per block than the device offers."""


class CompileError(RuntimeError):
    """NVRTC rejected a rendered kernel; the message carries NVRTC's log."""

    def __init__(self, message: str, log: str = "", source: str = "") -> None:
        super().__init__(message)
        self.log = log
        self.source = source
