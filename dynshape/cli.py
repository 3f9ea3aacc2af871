"""The dynshape command line: run the demo, list ops and kernels, explain the parameter table
of a call, load or compile kernels, and build kernel packages.

Every error on bad input is printed as one line ("dynshape: ...") with exit status 2.
"""
import argparse
import os
import sys

DESCRIPTION = """Neural-network operators on tensors of any shape from precompiled static
kernels, with no compilation at run time. Try: dynshape demo; dynshape ops; dynshape explain
relu 517x1531 --png."""


def _shape(text):
    try:
        return tuple(int(s) for s in text.replace("x", ",").split(",") if s != "")
    except ValueError:
        raise argparse.ArgumentTypeError(f"a shape is like 517x1531 or 3,255,257; got {text!r}")


def main(argv=None):
    ap = argparse.ArgumentParser(prog="dynshape", description=DESCRIPTION)
    sub = ap.add_subparsers(dest="cmd", required=True, metavar="COMMAND")
    sub.add_parser("demo", help="run several ops over never-seen shapes, checked against NumPy",
                   description="Run several ops over never-seen shapes, check them against "
                               "NumPy, and show the tables used and the compilations (none).")
    o = sub.add_parser("ops", help="list the ops with their family, dtypes and attributes",
                       description="List every op dynshape.run accepts: its kernel family, "
                                   "the input dtypes it accepts and its attributes (defaults).")
    o.add_argument("--family", action="append", metavar="FAMILY",
                   help="only this family (repeat for several)")
    ex = sub.add_parser("explain", help="print the parameter table a call would use, in "
                        "the coordinates of your tensor (and optionally draw it)",
                        description="Print the parameter table dynshape.run would use for "
                                    "an op on inputs of the given shapes (nothing computed).")
    ex.add_argument("op", help="an op name (see: dynshape ops)")
    ex.add_argument("shapes", nargs="+", type=_shape, help="one shape per input, e.g. 517x1531")
    ex.add_argument("--dtype", default="float32", help="input dtype (default: float32)")
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
    ex.add_argument("--target", default=None, help="the target whose table to show: cpu "
                    "(default) or cuda (the CUDA tile sets and GPU cost model; no GPU needed)")
    ex.add_argument("--limit", type=int, default=20, help="entries to print (default 20)")
    ex.add_argument("--png", nargs="?", const="", metavar="FILE",
                    help="also save a picture of the tiles on your tensor (default file: "
                         "OP_SHAPE_tiles.png); needs the plot extra (matplotlib)")
    sub.add_parser("catalog", help="list the static kernel families and compiled drivers",
                   description="List the static kernel families of the catalog (ops, dtypes, "
                               "tile shapes) and the drivers that run them.")
    w = sub.add_parser("warm", help="load or compile the kernels now",
                       description="Load the drivers from the kernel package or Numba's "
                                   "cache, compiling those missing, with progress.")
    w.add_argument("--family", action="append", metavar="FAMILY",
                   help="kernel family (repeat; default: all; see: dynshape catalog)")
    w.add_argument("--dtype", action="append", metavar="DTYPE",
                   help="dtype (repeat; default: each family's)")
    w.add_argument("--processes", type=int, default=os.cpu_count() or 1, metavar="N",
                   help="compile missing drivers in N processes at once (default: the "
                        "number of cores)")
    w.add_argument("--no-epilogues", action="store_true",
                   help="leave out the step interpreter that conv2d and matmul run only as "
                        "a fused sequence's epilogue (compiled by the first such call)")
    cb = sub.add_parser("calibrate", help="measure this host's cost-model constants and keep "
                        "them for the planners",
                        description="Run the elementwise driver on crafted tables to measure "
                                    "the cost model's constants on this host, and write them "
                                    "where the planners read them (the table directory's "
                                    "calibration/ folder, else the configuration directory).")
    cb.add_argument("--out", metavar="FILE", help="write the calibration here instead")
    pg = sub.add_parser("pregenerate", help="build a kernel package: drivers compiled ahead "
                        "of time, loaded later with dynshape.load_package or DYNSHAPE_PACKAGE")
    pg.add_argument("--out", required=True, help="the package directory to create")
    pg.add_argument("--family", action="append", help="op family (repeat; default: all)")
    pg.add_argument("--dtype", action="append", help="dtype (repeat; default: each family's)")
    pg.add_argument("--target", action="append", help="target (repeat; default: cpu); "
                    "cuda compiles the CUDA kernels to PTX (no GPU needed)")
    pg.add_argument("--cc", default="80,90", help="cuda: compute capabilities to compile "
                    "for (default: 80,90)")
    pg.add_argument("--no-cubin", action="store_true", help="cuda: PTX only (by default each "
                    "PTX is also assembled to a cubin where nvJitLink is available)")
    pg.add_argument("--cache", metavar="DIR", help="Numba cache to reuse and fill (default: "
                    "the environment's NUMBA_CACHE_DIR or the one next to the sources)")
    pg.add_argument("--fresh", action="store_true", help="compile everything in a new cache")
    pg.add_argument("--force", action="store_true", help="replace an existing package")
    pg.add_argument("--no-check", action="store_true",
                    help="skip loading the new package in a fresh process")
    pg.add_argument("--sign", metavar="KEY", help="sign with this Ed25519 private key (PEM; "
                    "default: your own key, created on first use in the config directory)")
    ks = sub.add_parser("keys", help="signing keys: packages load only when signed by a "
                        "trusted key")
    ka = ks.add_subparsers(dest="action", required=True, metavar="ACTION",
                           help="export, trust or list")
    ke = ka.add_parser("export", help="print your public key line (give it to the hosts "
                       "that load your packages)")
    ke.add_argument("--key", metavar="KEY", help="the public key of this private key (PEM) "
                    "instead of your own")
    kt = ka.add_parser("trust", help="trust packages signed by a public key")
    kt.add_argument("source", help="a file holding key lines (from `dynshape keys export`), "
                    "or - for standard input")
    ka.add_parser("list", help="show your key and the keys trusted here")
    args = ap.parse_args(argv)

    if args.cmd == "keys":
        return _keys(args)
    import dynshape
    try:
        return _dispatch(args, dynshape)
    except dynshape.DynshapeError as exc:
        print(f"dynshape: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:         # output piped into head, say: not an error
        sys.stderr.close()
        return 0


def _dispatch(args, dynshape):
    if args.cmd == "pregenerate" and args.target and "cuda" in args.target:
        if args.target != ["cuda"]:
            print("dynshape: build the cuda package on its own (--target cuda), apart from "
                  "the cpu one", file=sys.stderr)
            return 2
        from dynshape.cuda import package
        try:
            m = package.build(args.out, package.parse_ccs(args.cc), args.family, args.dtype,
                              force=args.force, progress=sys.stdout,
                              cubin=not args.no_cubin)
        except dynshape.DynshapeError as exc:
            print(f"dynshape: {exc}", file=sys.stderr)
            return 2
        cubins = sum("cubin" in r for r in m["kernels"])
        print(f"CUDA package {args.out}: {len(m['kernels'])} PTX files and {cubins} cubins "
              f"for cc {', '.join(m['ccs'])}"
              + ("" if m["cubin"] == "all" else f" (cubins: {m['cubin']})"))
        return 0
    if args.cmd == "pregenerate":
        from dynshape.packages.build import TARGETS, build
        build(args.out, args.family, args.dtype, tuple(args.target or TARGETS),
              cache_dir=args.cache, fresh=args.fresh, force=args.force,
              verify_load=not args.no_check, sign_key=args.sign)
        return 0
    if args.cmd == "demo":
        from dynshape.demo import main as demo
        demo()
    elif args.cmd == "explain":
        dynshape.set_policy("optimized" if args.optimized else "simplified")
        try:
            t = dynshape.explain(args.op, *_inputs(args), dtype=args.dtype,
                                 target=args.target, **dict(args.attr))
        except dynshape.DynshapeError as exc:
            print(f"dynshape: {exc}", file=sys.stderr)
            return 2
        print("empty result: no kernel call" if t is None else t.describe(limit=args.limit))
        if args.png is not None and t is not None:
            return _save_picture(t, args)
    elif args.cmd == "calibrate":
        from dataclasses import asdict

        from dynshape.planning import calibration
        dynshape.warm(["unary"], ["float32"], progress=sys.stdout)
        model = calibration.measure()
        path = calibration.save(model, args.out)
        calibration.apply()
        for k, v in asdict(model).items():
            print(f"  {k:12s} {v}")
        print(f"calibration written to {path}")
    elif args.cmd == "ops":
        _print_ops(dynshape, args.family)
    elif args.cmd == "catalog":
        _print_catalog(dynshape)
    elif args.cmd == "warm":
        done = dynshape.warm(args.family, args.dtype, progress=sys.stdout,
                             processes=max(args.processes, 1),
                             epilogues=not args.no_epilogues)
        print(f"ready: {len(done)} drivers ({sum(1 for d in done if d[3])} compiled)")
    return 0


def _print_ops(dynshape, families=None):
    rows = dynshape.describe_ops()
    known = sorted({r["family"] for r in rows})
    for f in families or ():
        if f not in known:
            raise dynshape.SettingError(f"unknown family {f!r}; known: {', '.join(known)}")
    family = None
    for r in rows:
        if families and r["family"] not in families:
            continue
        if r["family"] != family:
            family = r["family"]
            print(f"{family}:")
        attrs = ", ".join(f"{k}={v!r}" for k, v in r["attributes"].items()) or "-"
        print(f"  {r['name']:14s} dtypes: {', '.join(r['dtypes']):30s} attributes: {attrs}")


def _print_catalog(dynshape):
    from dynshape.warming import driver_families
    print(dynshape.CATALOG.describe())
    for f, dtypes in driver_families().items():
        if f not in dynshape.CATALOG.families:
            print(f"  {f:8s} cpu: one driver per dtype ({', '.join(dtypes)}) running step "
                  f"programs of the kernels above tile by tile (dynshape.fuse)")


def _keys(args):
    """``dynshape keys export|trust|list``: move public keys between hosts."""
    from dynshape.packages import signing
    try:
        if args.action == "export":
            print(signing.load_private_key(args.key)[1].line())
        elif args.action == "trust":
            if args.source == "-":
                keys = [signing.parse_key_line(line, "standard input")
                        for line in sys.stdin.read().splitlines()
                        if line.strip() and not line.lstrip().startswith("#")]
            else:
                keys = signing.read_key_lines(args.source)
            if not keys:
                raise signing.SigningKeyError(f"{args.source}: no key lines")
            for k in keys:
                added = signing.trust(k)
                print(("trusted " if added else "already trusted ") + k.describe())
            print(f"trust store: {signing.trust_store_path()}")
        else:
            own = signing.own_public_key()
            print(f"your key    {own.describe() if own else 'none yet (created on first use)'}"
                  f" {signing.own_key_path()}")
            keys, source = signing.trusted_keys()
            print(f"trusted     {len(keys)} keys, from {source}")
            for k in keys:
                print(f"  {k.describe()}")
    except signing.SigningKeyError as exc:
        print(f"dynshape: {exc}", file=sys.stderr)
        return 2
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
    from dynshape import ops
    from dynshape.errors import ArgumentError
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
    from dynshape.pictures.picture import plot_table
    path = args.png or "_".join([args.op] + ["x".join(map(str, s)) or "scalar"
                                              for s in args.shapes]) + "_tiles.png"
    try:
        geo = plot_table(table, path)
    except (ImportError, OSError) as exc:
        print(f"dynshape: {exc}", file=sys.stderr)
        return 2
    from dynshape.pictures.geometry import label
    print(f"picture: {path} ({geo.runs} entries run: "
          + ", ".join(f"{n} x {label(c)}" for c, n in sorted(geo.counts.items(),
                                                                key=lambda i: -i[1])) + ")")
    return 0


if __name__ == "__main__":
    sys.exit(main())
