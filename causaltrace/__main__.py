import sys

from causaltrace.cli import main

sys.exit(main())
