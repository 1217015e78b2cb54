"""`python -m router` is the `jobrouter` command."""

from router.cli import main

main()
