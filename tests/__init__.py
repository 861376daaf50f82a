"""The suite's folder is a regular package, not a namespace one: tira (autojudge-evaluate's
dependency, in the lock) installs a top-level package named ``tests`` into site-packages,
and a regular package anywhere on sys.path wins over a namespace one, so without this file
``from tests.io.test_output_failures import ...`` resolved to tira's tests and failed."""
