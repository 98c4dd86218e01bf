"""The lazy start: `import patchlane` in a process that never imports a target costs almost nothing.

A training job starts many interpreters that never import torch or megatron (the torchrun agent,
data-loader and compile workers, helper scripts), and ``patchlane run`` or a ``.pth`` activation
puts patchlane in every one of them. So ``import patchlane`` first tries the lazy path:

- :mod:`patchlane.lazy.arm` decides whether it may: the settings read as the full startup would
  read them, the watch list below is fresh and trusted, and no watched module is imported yet.
  Otherwise the startup loads at once, as it always did.
- :mod:`patchlane.lazy.watchlist` is that list: the top-level module names some entry (or the rank
  check) waits for, written by the validated-registry cache (:mod:`patchlane.registry.cache`)
  whenever it loads a registry set, with what it must match to still be true.
- :mod:`patchlane.lazy.watch` is the one import hook it installs for exactly those names. The
  first import of one of them loads the whole startup (registry, gates, wrapt hooks) right
  before that module runs, under its import lock, and everything is decided as it would have
  been.
- :mod:`patchlane.lazy.untouched` says what a process whose startup never ran decided: every
  entry as the startup walk records it before its target is imported (``pending`` and the
  rest), for the line each rank prints at exit.

Nothing here imports anything but ``os``, ``sys``, ``marshal`` and ``_thread``.
"""
