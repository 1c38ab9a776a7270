"""`python -m gradtrace`."""

from .cli import main

main()
