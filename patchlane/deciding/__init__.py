"""What a process decides about its entries, and what it says of them: the decider's walk
(:mod:`.decider`), the switches it reads (:mod:`.controls`), the ledger kinds' checks
(:mod:`.ledger`), the record of every decision (:mod:`.audit`), what a log shows (:mod:`.logs`),
what ``patchlane.report()`` returns (:mod:`.reporting`), and whether an applied entry was
proven on this stack (:mod:`.proof`)."""
