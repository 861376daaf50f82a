"""One thin module per command: options, help text, one library call per subcommand,
output. Shared plumbing lives in ``_base``, ``_options`` (flag blocks), ``_session`` and
``_batch`` (--batch-out, --batch-in); the top layer: nothing imports a command module, and
no command imports another."""
