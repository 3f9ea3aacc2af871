"""A compiling child of parallel warming (``dynshape.warming``): it reads jobs
``family:dtype`` from stdin, one per line, loads or compiles each (a driver, or the step
interpreter of a dtype for the job family ``steps``) into Numba's on-disk cache, and prints
``ready family dtype seconds`` after each.

It imports the kernel library only. ``import dynshape`` (op specs, planners, fusion: 0.42 s
against 0.19 s for the drivers alone) is needed only to load the kernel package named by
``DYNSHAPE_PACKAGE`` before anything compiles, as the parent did; the child then does too.
"""
import os
import sys
import time

#: the job family of a dtype's step interpreter (``cpu.step_link.STEPS``)
STEPS = "steps"
#: the variable naming a kernel package to load (``dynshape.packages.manifest.ENV`` is
#: this name: the one place it is spelled)
PACKAGE_ENV = "DYNSHAPE_PACKAGE"


def main(lines):
    if os.environ.get(PACKAGE_ENV):
        import dynshape  # noqa: F401  (loads the package before anything compiles)
    from dynshape_kernels import drivers
    from dynshape_kernels.cpu import step_link
    for line in lines:
        fam, dt = line.strip().split(":")
        t = time.perf_counter()
        if fam == STEPS:
            step_link.STEPS.ensure(dt)
        else:
            drivers.get(fam, dt)
        print(f"ready {fam} {dt} {time.perf_counter() - t:.2f}", flush=True)


if __name__ == "__main__":
    main(sys.stdin)
