"""What every room shares: one error root and one exit-code table, versions from outside
parsed without an exception, atomic writes, the trust rule for files read back, redaction of
credentials, and a missing requirement named. Leaves: they import nothing of patchlane above
them."""
