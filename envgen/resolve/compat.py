"""Can this driver and GPU run that CUDA build? The rules shared by resolve, diff and doctor."""
from __future__ import annotations

from datetime import date

from ..core.errors import InputError, shown
from ..core.model import CC_RE, DRIVER_RE, CudaRelease, Gpu, V, Variant
from ..core.record import dataclass
from ..matrix import Matrix

NATIVE, MINOR, FORWARD = "native", "minor-version compatibility", "forward compatibility"


def check_driver(text, what: str = "--driver") -> str:
    """A driver version as a user typed it (535, 535.104 or 535.104.05), or InputError; a
    bare branch is judged as its first release (as_release)."""
    if not isinstance(text, str) or not DRIVER_RE.fullmatch(text):
        raise InputError(f"{what} {shown(text)} is not a driver version like 535.104.05")
    return text


def check_cc(text, what: str = "--cc") -> str:
    """A compute capability such as 9.0, or InputError."""
    if not isinstance(text, str) or not CC_RE.fullmatch(text):
        raise InputError(f"{what} {shown(text)} is not a compute capability like 9.0")
    return text


@dataclass(frozen=True)
class Verdict:
    ok: bool
    how: str | None      # NATIVE, MINOR, FORWARD, or None when it cannot run
    why: str             # one sentence


def driver_cuda(matrix: Matrix, driver: str) -> str | None:
    """The CUDA version a driver reports (nvidia-smi's "CUDA Version"), from the matrix."""
    rel = matrix.newest_driver_cuda(driver)
    return rel.short if rel else None


def as_release(matrix: Matrix, driver: str) -> str:
    """A driver as a release: a bare branch (535) is read as the branch's first release in
    the matrix (535.43.02), the oldest driver it can mean, instead of 535.0.0, which is
    older than every real release and judged like none of them."""
    if "." not in driver:
        row = matrix.driver_branch_of(driver)
        if row is not None and row.first:
            return row.first
    return driver


def gpu_knows(matrix: Matrix, gpu: Gpu, driver: str) -> Verdict:
    """Whether `driver` knows `gpu` at all: a GPU needs a driver branch that supports its
    product, neither older than its first driver nor past its last branch, whatever CUDA
    the image carries (forward compatibility included)."""
    driver = as_release(matrix, driver)
    last = past_last_branch(matrix, gpu, driver)
    if last is not None:
        return last
    floor = matrix.gpu_min_driver(gpu)
    if floor is None:
        return Verdict(True, None, f"the matrix names no first driver for the {gpu.name}")
    need, _source, inferred = floor
    note = " (inferred: no source states it)" if inferred else ""
    if V(driver) < V(need):
        return Verdict(False, None, f"driver {driver} is older than {need}, the first driver "
                                    f"that supports the {gpu.name}{note}")
    return Verdict(True, None, f"driver {driver} supports the {gpu.name} (from {need}{note})")


def past_last_branch(matrix: Matrix, gpu: Gpu, driver: str) -> Verdict | None:
    """The refusal when `driver` is on a branch after the last one that supports `gpu`."""
    last = matrix.gpu_last_branch(gpu)
    if last is None or int(driver.split(".")[0]) <= int(last[0]):
        return None
    branch, _source, why = last
    arch = f" ({gpu.arch.capitalize()})" if gpu.arch else ""
    note = f" (inferred: {why})" if why else ""
    return Verdict(False, None, f"driver {driver} is past R{branch}, the last driver branch "
                                f"that supports the {gpu.name}{arch}{note}")


def driver_runs(matrix: Matrix, cuda: CudaRelease, driver: str, gpu: Gpu | None = None,
                compat_available: bool = True) -> Verdict:
    """Whether `driver` runs an application built with `cuda`, and how."""
    driver = as_release(matrix, driver)
    if gpu is not None:
        known = gpu_knows(matrix, gpu, driver)
        if not known.ok:
            return known
    if V(driver) >= V(cuda.toolkit_driver):
        ships = (f"the driver taken to run CUDA {cuda.version} natively (inferred: "
                 f"{cuda.why})" if cuda.inferred else f"the driver CUDA {cuda.version} ships with")
        return Verdict(True, NATIVE, f"driver {driver} is at least {cuda.toolkit_driver}, "
                                     f"{ships}")
    floor = matrix.cuda_major(cuda.major)
    if floor and V(driver) >= V(floor.minimum_driver):
        return Verdict(True, MINOR, f"driver {driver} runs CUDA {cuda.short} through "
                                    f"minor-version compatibility (CUDA {cuda.major}.x needs "
                                    f"at least {floor.minimum_driver}); PTX JIT compilation "
                                    f"fails on this driver")
    branch = driver.split(".")[0]
    fc = next((f for f in matrix.forward_compat if f.cuda == cuda.short), None)
    need = floor.minimum_driver if floor else cuda.toolkit_driver
    if fc and branch in fc.branches:
        classes = "/".join(fc.gpu_classes)
        if gpu is None:   # resolve and diff with no --gpu; doctor with a GPU not in the
            # matrix (doctor has no --gpu): the advice must be true for all three
            return Verdict(False, None, f"driver {driver} runs CUDA {cuda.short} only through "
                                        f"forward compatibility, on {classes} GPUs, and the "
                                        f"GPU is not named or not in the matrix (`envgen "
                                        f"resolve` and `build` take --gpu NAME)")
        if gpu.gpu_class not in fc.gpu_classes:
            return Verdict(False, None, f"driver {driver} is older than {need}, and forward "
                                        f"compatibility for CUDA {cuda.short} is not available "
                                        f"on {gpu.gpu_class} GPUs like the {gpu.name}")
        if not compat_available:
            return Verdict(False, None, f"driver {driver} runs CUDA {cuda.short} only through "
                                        f"forward compatibility, which needs a base image with "
                                        f"cuda-compat {cuda.short}")
        note = f" (inferred: {fc.why})" if fc.inferred else ""
        return Verdict(True, FORWARD, f"driver {driver} (R{branch}) runs CUDA {cuda.short} on "
                                      f"the {gpu.name} through forward compatibility "
                                      f"(cuda-compat in the image){note}"
                                      + _end_of_life(matrix, branch))
    return Verdict(False, None, f"driver {driver} is older than {need}, the minimum for CUDA "
                                f"{cuda.major}.x (minor-version compatibility)"
                                + ("" if fc is None else f", and R{branch} is not a "
                                   f"forward-compatible branch for CUDA {cuda.short}"))


def _end_of_life(matrix: Matrix, branch: str) -> str:
    """A warning, not a refusal: NVIDIA's forward-compatibility table drops a branch (R470)
    when it reaches its end of life, not when its cuda-compat pairing stops working."""
    br = matrix.driver_branch_of(branch)
    if br is None or not br.eol or br.eol >= date.today().isoformat()[:len(br.eol)]:
        return ""
    return f"; R{branch} is past its end of life ({br.eol}): it gets no more fixes"


def kernels_for(variant: Variant, cc: str, how: str | None = NATIVE) -> Verdict:
    """Whether a build carries kernels (SASS, or PTX to JIT) for compute capability `cc`."""
    if variant.cuda is None:
        return Verdict(True, None, "a CPU build needs no GPU kernels")
    major, minor = (int(x) for x in cc.split("."))
    archs = variant.compute_capabilities
    listed = ", ".join(archs) or "none"
    if cc in archs:
        return Verdict(True, NATIVE, f"the build has kernels for compute capability {cc}")
    same = [a for a in archs if int(a.split(".")[0]) == major
            and int(a.split(".")[1]) <= minor]
    if same:
        return Verdict(True, NATIVE, f"kernels for compute capability {same[-1]} run on "
                                     f"{cc} (same major)")
    if variant.ptx and V(variant.ptx) <= V(cc):
        if how == MINOR:
            return Verdict(False, None, f"no kernels for compute capability {cc}: only PTX "
                                        f"{variant.ptx}, and PTX JIT fails under "
                                        f"minor-version compatibility")
        return Verdict(True, "ptx", f"PTX for {variant.ptx} is JIT-compiled for {cc} at "
                                    f"first start")
    return Verdict(False, None, f"no kernels for compute capability {cc} (the build has "
                                f"{listed}): \"no kernel image is available\"")
