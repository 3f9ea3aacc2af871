"""Command line: ``dynshape demo | explain OP SHAPE... | catalog | warm | pregenerate``."""
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
    ex = sub.add_parser("explain", help="print the parameter table a call would use, in "
                        "the coordinates of your tensor (and optionally draw it)")
    ex.add_argument("op", help="op name, e.g. relu, add, softmax, sum, matmul, conv2d")
    ex.add_argument("shapes", nargs="+", type=_shape,
                    help="one shape per input, e.g. 517x1531 (or 3,255,257)")
    ex.add_argument("--dtype", default="float32", help="dtype of the inputs (default float32)")
    ex.add_argument("--attr", action="append", default=[], metavar="NAME=VALUE",
                    type=_attr, help="an op attribute, e.g. axis=1 or pads=1,1,1,1 (repeat)")
    layout = ex.add_mutually_exclusive_group()
    layout.add_argument("--transposed", action="store_true",
                        help="inputs are transposed views (last two dims swapped) of "
                             "C-contiguous arrays, e.g. x.T")
    layout.add_argument("--axes", type=_axes, metavar="ORDER",
                        help="inputs of this rank are views a.transpose(ORDER) of "
                             "C-contiguous arrays, e.g. 1,0 or 0,2,1")
    ex.add_argument("--optimized", action="store_true",
                    help="the optimized combination (default: the simplified one)")
    ex.add_argument("--limit", type=int, default=20, help="entries to print (default 20)")
    ex.add_argument("--png", nargs="?", const="", metavar="FILE",
                    help="also save a picture of the tiles on your tensor (default file: "
                         "OP_SHAPE_tiles.png); needs the plot extra (matplotlib)")
    sub.add_parser("catalog", help="list the static kernel families")
    w = sub.add_parser("warm", help="load or compile the kernels now")
    w.add_argument("--family", action="append")
    w.add_argument("--dtype", action="append")
    pg = sub.add_parser("pregenerate", help="build a kernel package: drivers compiled ahead "
                        "of time, loaded later with dynshape.load_package or DYNSHAPE_PACKAGE")
    pg.add_argument("--out", required=True, help="the package directory to create")
    pg.add_argument("--family", action="append", help="op family (repeat; default: all)")
    pg.add_argument("--dtype", action="append", help="dtype (repeat; default: each family's)")
    pg.add_argument("--target", action="append", help="target (repeat; default: cpu)")
    pg.add_argument("--cache", metavar="DIR", help="Numba cache to reuse and fill (default: "
                    "the environment's NUMBA_CACHE_DIR or the one next to the sources)")
    pg.add_argument("--fresh", action="store_true", help="compile everything in a new cache")
    pg.add_argument("--force", action="store_true", help="replace an existing package")
    pg.add_argument("--no-check", action="store_true",
                    help="skip loading the new package in a fresh process")
    args = ap.parse_args(argv)

    import dynshape
    if args.cmd == "pregenerate":
        from .pregenerate import TARGETS, build
        try:
            build(args.out, args.family, args.dtype, tuple(args.target or TARGETS),
                  cache_dir=args.cache, fresh=args.fresh, force=args.force,
                  verify_load=not args.no_check)
        except dynshape.DynshapeError as exc:
            print(f"dynshape: {exc}", file=sys.stderr)
            return 2
        return 0
    if args.cmd == "demo":
        from .demo import main as demo
        demo()
    elif args.cmd == "explain":
        dynshape.set_policy("optimized" if args.optimized else "simplified")
        try:
            t = dynshape.explain(args.op, *_inputs(args), dtype=args.dtype,
                                 **dict(args.attr))
        except dynshape.DynshapeError as exc:
            print(f"dynshape: {exc}", file=sys.stderr)
            return 2
        print("empty result: no kernel call" if t is None else t.describe(limit=args.limit))
        if args.png is not None and t is not None:
            return _save_picture(t, args)
    elif args.cmd == "catalog":
        print(dynshape.CATALOG.describe())
    elif args.cmd == "warm":
        dynshape.warm(args.family, args.dtype)
        from dynshape_kernels import drivers
        print("loaded:", ", ".join(f"{f}/{d}" for f, d in drivers.loaded()))
    return 0


def _attr(text):
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"an attribute is NAME=VALUE, got {text!r}")
    if value.lower() in ("true", "false"):
        return name, value.lower() == "true"
    try:
        vals = [float(v) if any(c in v for c in ".e") else int(v) for v in value.split(",")]
    except ValueError:
        return name, value
    return name, vals[0] if len(vals) == 1 else tuple(vals)


def _axes(text):
    try:
        return tuple(int(a) for a in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"an axes order is like 1,0 or 0,2,1; got {text!r}")


def _inputs(args):
    """Shapes, or for --transposed / --axes views of C-contiguous placeholder arrays (no
    memory) with those shapes."""
    if not (args.transposed or args.axes):
        return args.shapes
    from . import ops
    from .errors import ArgumentError
    out = []
    for shape in args.shapes:
        order = None
        if args.transposed and len(shape) >= 2:
            order = tuple(range(len(shape) - 2)) + (len(shape) - 1, len(shape) - 2)
        elif args.axes and len(args.axes) == len(shape):
            order = args.axes
            if sorted(order) != list(range(len(shape))):
                raise ArgumentError(f"--axes {','.join(map(str, order))} is not an order of "
                                    f"the {len(shape)} axes of {shape}")
        if order is None:
            out.append(shape)
            continue
        base = [0] * len(shape)
        for i, a in enumerate(order):
            base[a] = shape[i]
        out.append(ops.placeholder(tuple(base), args.dtype).transpose(order))
    return out


def _save_picture(table, args):
    from .picture import plot_table
    path = args.png or "_".join([args.op] + ["x".join(map(str, s)) or "scalar"
                                              for s in args.shapes]) + "_tiles.png"
    try:
        geo = plot_table(table, path)
    except (ImportError, OSError) as exc:
        print(f"dynshape: {exc}", file=sys.stderr)
        return 2
    from .geometry import label
    print(f"picture: {path} ({geo.runs} entries run: "
          + ", ".join(f"{n} x {label(c)}" for c, n in sorted(geo.counts.items(),
                                                                key=lambda i: -i[1])) + ")")
    return 0


if __name__ == "__main__":
    sys.exit(main())
