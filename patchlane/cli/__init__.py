"""The ``patchlane`` command line. Only this package prints or exits."""
