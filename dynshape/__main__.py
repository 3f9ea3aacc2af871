import sys

from dynshape.cli import main

sys.exit(main(sys.argv[1:] or ["demo"]))
