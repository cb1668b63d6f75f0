"""`python -m tracer dump TARGET [options]`: the same as the `tracer-dump` command."""
import sys
from .tools.dump import main as dump_main


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] in ("-h", "--help") or argv[0] != "dump":
        print("usage: python -m tracer dump TARGET [options]   (see: python -m tracer dump --help)",
              file=sys.stderr if argv and argv[0] not in ("-h", "--help") else sys.stdout)
        return 0 if argv and argv[0] in ("-h", "--help") else 2
    return dump_main(argv[1:])


if __name__ == "__main__":
    sys.exit(main())
