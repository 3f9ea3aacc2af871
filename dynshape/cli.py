"""Command line: ``dynshape demo | explain OP SHAPE... | catalog | warm``."""
import argparse
import sys


def _shape(text):
    try:
        return tuple(int(s) for s in text.replace("x", ",").split(",") if s != "")
    except ValueError:
        raise argparse.ArgumentTypeError(f"a shape is like 517x1531 or 3,255,257; got {text!r}")


def main(argv=None):
    ap = argparse.ArgumentParser(prog="dynshape", description=__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("demo", help="run several ops over never-seen shapes")
    ex = sub.add_parser("explain", help="print the parameter table a call would use")
    ex.add_argument("op")
    ex.add_argument("shapes", nargs="+", type=_shape, help="one shape per input, e.g. 517x1531")
    ex.add_argument("--dtype", default="float32")
    ex.add_argument("--optimized", action="store_true", help="the optimized combination")
    ex.add_argument("--limit", type=int, default=20, help="entries to print")
    sub.add_parser("catalog", help="list the static kernel families")
    w = sub.add_parser("warm", help="load or compile the kernels now")
    w.add_argument("--family", action="append")
    w.add_argument("--dtype", action="append")
    args = ap.parse_args(argv)

    import dynshape
    if args.cmd == "demo":
        from .demo import main as demo
        demo()
    elif args.cmd == "explain":
        dynshape.set_policy("optimized" if args.optimized else "simplified")
        try:
            t = dynshape.explain(args.op, *args.shapes, dtype=args.dtype)
        except dynshape.DynshapeError as exc:
            print(f"dynshape: {exc}", file=sys.stderr)
            return 2
        print("empty result: no kernel call" if t is None else t.describe(limit=args.limit))
    elif args.cmd == "catalog":
        print(dynshape.CATALOG.describe())
    elif args.cmd == "warm":
        dynshape.warm(args.family, args.dtype)
        from dynshape_kernels import drivers
        print("loaded:", ", ".join(f"{f}/{d}" for f, d in drivers.loaded()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
