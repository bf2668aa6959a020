"""One module per group of `kgstream` commands; kgstream/cli.py parses and dispatches."""
