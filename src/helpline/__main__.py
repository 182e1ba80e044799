"""``python -m helpline``: the same as the ``helpline`` command."""

from helpline.cli import main

main()
