"""`python -m jobrouter` is the `jobrouter` command."""

from jobrouter.cli import main

main()
