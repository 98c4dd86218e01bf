"""What an entry is checked against on this stack: the installed release against its range
(:mod:`.gates`) and the target's normalized source (:mod:`.fingerprint`). Floors, pins and
compat gates build on these in :mod:`patchlane.deciding.ledger`."""
