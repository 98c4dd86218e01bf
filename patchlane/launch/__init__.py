"""``patchlane run``: activate patchlane in every Python process a command starts, with no edit
to the training script.

The way ``opentelemetry-instrument`` and ``ddtrace-run`` do it: :mod:`.command` puts
``patchlane/launch/bootstrap`` first on ``PYTHONPATH`` and execs the command. That folder holds
one file, ``sitecustomize.py``, which every interpreter started with that environment runs
at startup (``site`` imports it): the launcher itself, each ``torchrun`` / ``srun`` rank, and
their children (data-loader workers started with ``spawn``, compile workers). It calls
:func:`.activate.activate` (``import patchlane``, so every rank decides its entries and checks
rank agreement after ``init_process_group``) and then runs the ``sitecustomize`` that was
there before, if any (:func:`.activate.chain`), so an existing one keeps working.

Interpreters started with ``-I``, ``-E`` or ``-S`` ignore ``PYTHONPATH`` or ``site`` and are not
reached; a process that does not inherit the environment (a scheduler that scrubs it) is not
either. ``srun patchlane run -- python train.py`` puts the launcher inside each task.
"""
