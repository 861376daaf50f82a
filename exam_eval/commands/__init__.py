"""One thin module per command: options, help text, one library call per subcommand,
output. Shared plumbing lives in ``_base``, ``_options`` (flag blocks) and ``_session``;
the top layer: nothing imports a command module, and no command imports another."""
