"""Declarative kernel specifications.

A kernel is declared once, as a :class:`KernelSpec`: its template file, tile parameters with defaults
(optionally per compute capability), constraints between parameters (each with a message), the tuning
space, and how grid, block and dynamic shared memory follow from the parameters and M, N, K.
Tests, benchmarks, the tuner and the CLI discover kernels through the registry in ``_ladder``.
"""

from __future__ import annotations

import operator
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from types import MappingProxyType

from .dtypes import SPEC_DTYPES
from .errors import ConfigError

Config = Mapping[str, int]
SCALES = ("", "tensor", "block")  # KernelSpec.scales
Dim3 = tuple[int, int, int]


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def package_template(path: str) -> bool:
    """Whether ``path`` names a file under cumm/kernels (a rung's template or a shared header)."""
    return bool(path) and not os.path.isabs(path) and resources.files("cumm").joinpath("kernels", path).is_file()


def resolve_template(path: str) -> str:
    """A template or header path as a spec keeps it: relative to cumm/kernels when such a file exists there,
    otherwise absolute (a relative path is taken from the working directory). Existence is checked when the
    spec is registered (cumm.register)."""
    path = os.fspath(path)
    if package_template(path):
        return path
    path = os.path.abspath(os.path.expanduser(path))
    kernels = os.path.join(str(resources.files("cumm")), "kernels")
    inside = os.path.relpath(path, kernels)  # a rung's spec names its template by its own path
    if not inside.startswith(os.pardir) and package_template(inside):
        return inside.replace(os.sep, "/")
    return path


@dataclass(frozen=True)
class Constraint:
    """A Python expression over the parameters that must hold, and why."""

    expr: str
    message: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "_code", compile(self.expr, f"<constraint {self.expr}>", "eval"))

    def holds(self, cfg: Config) -> bool:
        return bool(eval(self._code, {"__builtins__": {}, "min": min, "max": max}, dict(cfg)))


@dataclass(frozen=True, eq=False, repr=False)  # identity equality and hash: a spec is one registry entry
class KernelSpec:
    name: str
    # A file: a path under cumm/kernels (the ladder's), else absolute or relative to the working directory
    # (made absolute here). With ``source``, only the name NVRTC's messages give the template.
    template: str = field(default="", kw_only=True)
    summary: str
    defaults: Mapping[str, int]
    block: Callable[[Config], Dim3]
    grid: Callable[[Config, int, int, int], Dim3]
    constraints: Sequence[Constraint] = ()
    smem: Callable[[Config], int] = lambda cfg: 0  # dynamic shared memory, bytes
    cc_defaults: Mapping[int, Mapping[str, int]] = field(default_factory=dict)
    space: Mapping[str, Sequence[int]] = field(default_factory=dict)
    derived: Callable[[Config], dict[str, int]] = lambda cfg: {}  # named helpers for constraints
    kind: str = "gemm"
    # Operands whose global loads are 16-byte when VEC_A / VEC_B = 1: True (both), "a", "b" or False.
    # Declaring one lets cumm.matmul copy an unaligned operand into a padded buffer (cumm/plan/repack.py),
    # which requires that the loads never read past column K of A or N of B (the padding is not set).
    vector_loads: bool | str = False
    # The template stores C 16 bytes at a time when VEC_C, and an unaligned C (scalar stores) measured slower
    # than computing into a padded buffer and copying it back (cumm/plan/repack.py): cumm.matmul may then do that.
    stage_out: bool = False
    # Split-K: the template starts with CUMM_SPLIT_K(BK) (common.cuh) and its grid has z = 1, so cumm.matmul
    # may launch it with gridDim.z = S slices of K (split_k=S) and sum the partial products (cumm/plan/splitk.py).
    split_k: bool = False
    # Oldest compute capability (e.g. 80) whose instructions the template uses; 0: any.
    min_cc: int = 0
    # The template uses instructions of exactly one architecture (wgmma: sm_90a), so it is compiled for
    # sm_<min_cc>a and runs on that compute capability only.
    arch_specific: bool = False
    # Shared device code (files in cumm/kernels) rendered between common.cuh and the template, in order.
    headers: tuple[str, ...] = ()
    # Named configurations (each overrides some defaults), e.g. the tile shapes a chain kernel's size rule picks.
    configs: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    # A persistent kernel: one launch of at most the resident blocks (a GEMM rung walks the tiles itself; a chain
    # kernel also gets a scratch array for T and a grid barrier between its phases).
    persistent: bool = False
    # A batched variant that walks the tiles of the whole batch itself (tile t of the run: tile t % tiles of product
    # t / tiles), so that a batch of small products fills the GPU: launched on (blocks, 1, 1), not grid z over the
    # batch, with the batch count as an int argument after the batch strides (CUMM_BATCHED's extra argument).
    schedules_batch: bool = False
    # Reads column-major (transposed) A and B in place, when the copy engine can (their columns on 16 bytes): the
    # host renders CUMM_TA / CUMM_TB and passes tensor_maps a ``layout`` (cumm.runtime.render's TRANSPOSED_A | _B bits);
    # other kernels get a row-major copy of such an operand.
    reads_transposed: bool = False
    # Its stores go through the epilogue hook (include/epilogue.cuh: alpha arrives as a CummAlpha), so a fused
    # epilogue (cumm.matmul's bias=, activation=, epilogue=) runs inside it; False: such calls run another rung.
    epilogue: bool = True
    # Its tile stores hold a thread's column blocks 8 j and 8 (j + 1) together (include/epilogue.cuh's wgmma tile
    # stores), so a glu= call (C = act(gate) * up over the product's paired 8-column blocks) runs inside it.
    glu: bool = False
    # Kernels that read operands through the copy engine: tensor_maps(cfg, M, N, K, lda, ldb, ldc, c_map) gives
    # the maps (cumm.runtime.tmaps.MapSpec, or None for a zeroed one) passed after the GEMM arguments; operands the copy
    # engine cannot read (a pointer not 16-byte aligned, a row pitch not a multiple of 16 bytes) run ``fallback``.
    # In a batched variant each map gets the batch as a third dimension (MapSpec.batched; a batch stride that is
    # not a multiple of 16 bytes runs ``fallback``), and the kernel reads matrix z (0 for a broadcast operand).
    tensor_maps: Callable | None = None
    # (A rung with ``pieces``: the rung that runs its product, on the FP32 operands, when the pieces' memory cannot be
    # had: cumm/plan/execute.py, cumm/api/fused.py.)
    fallback: str | None = None
    # A scratch buffer the kernel takes as its last argument (after any maps): workspace(cfg, M, N, K, blocks)
    # gives its bytes for a product launched on `blocks` blocks in x, 0 for a null pointer. cumm keeps one per
    # device and stream (launches on one stream never share it at once), zeroed when made; a launch must leave
    # what the next one reads (flags) as it found it. Direct launches only (kernels with tensor maps).
    workspace: Callable[[Config, int, int, int, int], int] | None = None
    # Changes to the chosen configuration for the operands' row pitches (bytes): pitch_config(cfg, pitch_a, pitch_b)
    # gives parameter overrides ({} for none) for a 2-D product of row-major operands whose configuration cumm
    # chose (not one given with config=); an override that breaks a constraint is not applied.
    pitch_config: Callable[[Config, int, int], Mapping[str, int]] | None = None
    # Changes to the chosen configuration for the exact shape: shape_config(cfg, M, N, K, sms) gives parameter
    # overrides ({} for none) for a product whose configuration cumm chose (a tuned entry is tuned at its
    # bucket's shape, the heuristic's defaults at none), on a GPU with `sms` multiprocessors; a batch of nb
    # products of a spec that schedules batches is weighed as one product nb M rows tall. Applied before
    # pitch_config (which sees its result), and only when the result keeps every constraint.
    shape_config: Callable[[Config, int, int, int, int], Mapping[str, int]] | None = None
    # The template's text itself, instead of a file (then ``template`` defaults to "<name>.cu").
    source: str | None = field(default=None, repr=False)
    # Element types of A and B the template handles (C = A @ B in the same type).
    dtypes: tuple[str, ...] = ("float32",)
    # kernel="auto" runs it for its dtypes without a tuned entry: of the ladder's rungs marked ``top`` that take the
    # product's dtype and run on the device (and run batches, or split K, when the product needs that), the highest.
    top: bool = False
    # The tuner races it for its dtypes (cumm.tune, python -m cumm tune --standard), where the device runs it.
    raced: bool = False
    # The scales a scaled-FP8 rung applies (cumm.scaled_matmul): "tensor" (one per tensor, per row of A, per column
    # of B), "block" (1 x 128 blocks of A, 128 x 128 blocks of B); "" for matmul's rungs. scaled_matmul's auto
    # takes the top rung of the inputs' dtypes with the call's scale layout.
    scales: str = ""
    # A rung beside the ladder, for some shapes only (e.g. few tiles and a deep K): kernel="auto" runs it where a
    # tuned entry says it was fastest, never as its dtype's top rung.
    branch: bool = False
    # The tuner races it only at products of at most this many rows (0: any), e.g. a decode rung that cannot win
    # with more; kernel="auto" runs it where a tuned entry says it won.
    race_max_m: int = 0
    # kernel="auto" runs it for a product with a fused epilogue (bias=, activation=, epilogue=) at most this deep
    # (K) where it would run its dtype's top rung; 0: never (cumm/plan/routes.py, short_k_route).
    epilogue_max_k: int = 0
    # Deeper than epilogue_max_k, the products it still takes in place of the top rung: called with (rows, N, K,
    # multiprocessors), a batch's rows being nb M (cumm/plan/routes.py, short_k_route); None: none.
    epilogue_shapes: Callable[[int, int, int, int], bool] | None = None
    # Its kernel reads FP16 pieces of the float32 operands (hi and lo, rows and columns scaled by powers of two),
    # made before each launch by cumm/plan/pieces.py; its maps and lda, ldb are the pieces'.
    pieces: bool = False
    # A top rung that kernel="auto" runs only for the products this says (M, N, K, multiprocessors); for the others
    # the next top rung below it. None: every product.
    top_shapes: Callable[[int, int, int, int], bool] | None = None
    # Runs batched products in one launch (cumm.runtime.render.supports_batch: its template moves its pointers to
    # its product, or it walks the batch's tiles): set once when the spec is registered (cumm.ladder.registry.add).
    batches: bool = field(default=False, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.source is not None and not isinstance(self.source, str):
            raise TypeError(f"{self.name}: source must be the template's text (a str), got {type(self.source)}")
        if not self.template:
            if self.source is None:
                raise ValueError(f"{self.name}: give template= (a .cu file) or source= (the template's text)")
            object.__setattr__(self, "template", f"{self.name}.cu")
        elif self.source is None:
            object.__setattr__(self, "template", resolve_template(self.template))
        object.__setattr__(self, "headers", tuple(resolve_template(h) for h in self.headers))
        dtypes = (self.dtypes,) if isinstance(self.dtypes, str) else tuple(self.dtypes)
        bad = [d for d in dtypes if d not in SPEC_DTYPES]
        if not dtypes or bad:
            raise ValueError(
                f"{self.name}: dtypes must be a non-empty tuple of {', '.join(SPEC_DTYPES)}; got {self.dtypes!r}"
            )
        if self.scales not in SCALES:
            raise ValueError(f"{self.name}: scales must be one of {SCALES}, got {self.scales!r}")
        object.__setattr__(self, "dtypes", dtypes)
        object.__setattr__(self, "defaults", MappingProxyType(dict(self.defaults)))
        if self.reads_transposed and self.tensor_maps is None:
            raise ValueError(
                f"{self.name}: reads_transposed needs tensor_maps (it receives the layout of the transposed operands, "
                "and the kernel reads them through those maps)"
            )
        for fname in ("race_max_m", "epilogue_max_k"):  # compared with M and K on every race and epilogue call
            v = getattr(self, fname)
            if type(v) is not int or v < 0:
                raise ValueError(f"{self.name}: {fname} must be an int >= 0 (0: no limit / never), got {v!r}")
        if self.epilogue_shapes is not None and not callable(self.epilogue_shapes):
            raise ValueError(f"{self.name}: epilogue_shapes must be a callable (rows, N, K, multiprocessors) or None")
        if self.split_k and "BK" not in self.defaults:
            raise ValueError(f"{self.name}: split_k needs a BK parameter (the slab depth slices are made of)")
        for cc, over in self.cc_defaults.items():
            unknown = set(over) - set(self.defaults)
            if unknown:
                raise ValueError(f"{self.name}: cc_defaults[{cc}] names unknown parameters {sorted(unknown)}")
        unknown = set(self.space) - set(self.defaults)
        if unknown:
            raise ValueError(f"{self.name}: space names unknown parameters {sorted(unknown)}")
        for cname, over in self.configs.items():
            unknown = set(over) - set(self.defaults)
            if unknown:
                raise ValueError(f"{self.name}: configuration {cname!r} names unknown parameters {sorted(unknown)}")
        object.__setattr__(
            self, "configs", MappingProxyType({k: MappingProxyType(dict(v)) for k, v in self.configs.items()})
        )

    def __repr__(self) -> str:
        flags = [
            f
            for f in (
                "split_k",
                "stage_out",
                "arch_specific",
                "persistent",
                "schedules_batch",
                "reads_transposed",
                "top",
                "raced",
                "branch",
            )
            if getattr(self, f)
        ]
        if self.vector_loads:
            flags.append(f"vector_loads={self.vector_loads!r}")
        if self.min_cc:
            flags.append(f"min_cc={self.min_cc}")
        parts = [
            repr(self.name),
            f"kind={self.kind!r}",
            f"template={self.template!r}",
            "defaults={" + ", ".join(f"{k}={v}" for k, v in self.defaults.items()) + "}",
            f"{len(self.constraints)} constraints",
            f"space over {list(self.space)}",
        ]
        if self.configs:
            parts.append(f"configs={list(self.configs)}")
        return f"KernelSpec({', '.join(parts + flags)})"

    @property
    def params(self) -> tuple[str, ...]:
        return tuple(self.defaults)

    def default_config(self, cc: int | None = None) -> dict[str, int]:
        cfg = dict(self.defaults)
        if cc is not None:
            cfg.update(self.cc_defaults.get(cc, {}))
        return cfg

    def resolve(self, overrides: Mapping[str, int] | str | None = None, cc: int | None = None) -> dict[str, int]:
        """Defaults for ``cc`` updated with ``overrides`` (a mapping, or the name of one of ``configs``);
        raises ConfigError naming what is wrong."""
        if isinstance(overrides, str):
            if overrides not in self.configs:
                raise ConfigError(
                    f"kernel {self.name!r} has no configuration named {overrides!r}; its named "
                    f"configurations are {list(self.configs)}"
                )
            overrides = self.configs[overrides]
        cfg = self.default_config(cc)
        if overrides:
            unknown = [k for k in overrides if k not in cfg]
            if unknown:
                raise ConfigError(f"kernel {self.name!r} has no parameter(s) {unknown}; its parameters are {list(cfg)}")
            for k, v in overrides.items():
                try:
                    if isinstance(v, bool):
                        raise TypeError
                    iv = operator.index(v)
                except TypeError:
                    iv = -1
                if iv < 0:
                    raise ConfigError(f"kernel {self.name!r}: parameter {k} must be a non-negative integer, got {v!r}")
                cfg[k] = iv
        self.check(cfg)
        return cfg

    def adjusted(self, config: Config | None, cc: int, rule: Callable[..., Mapping[str, int]], *args) -> Config | None:
        """``config`` with the overrides ``rule(cfg, *args)`` gives (the spec's shape_config or pitch_config on its
        configuration ``cfg`` for ``cc``), when they keep every constraint; else ``config`` as it was."""
        cfg = self.resolve(config, cc)
        over = rule(cfg, *args)
        if not over or all(cfg.get(k) == v for k, v in over.items()):
            return config
        new = {**cfg, **over}
        return config if self.violations(new) else new

    def violations(self, cfg: Config) -> list[str]:
        """Messages of every constraint ``cfg`` violates, each with the expression and the values."""
        env = dict(cfg)
        try:
            env.update(self.derived(cfg))
        except ZeroDivisionError:  # a zero parameter; its own constraint reports it
            pass
        out = []
        for c in self.constraints:
            try:
                ok = c.holds(env)
            except (ZeroDivisionError, NameError):
                ok = False
            if not ok:
                names = [p for p in env if re.search(rf"\b{p}\b", c.expr)]
                values = ", ".join(f"{p}={env[p]}" for p in names)
                out.append(f"{c.message} (needs {c.expr}; got {values})")
                if c.expr.endswith(">= 1"):  # later constraints would divide by zero
                    break
        return out

    def check(self, cfg: Config) -> None:
        bad = self.violations(cfg)
        if bad:
            raise ConfigError(f"invalid configuration for kernel {self.name!r}: " + "; ".join(bad))

    def supports(self, cc: int) -> bool:
        """Whether the template runs on compute capability ``cc`` (e.g. 90)."""
        return cc >= self.min_cc and (not self.arch_specific or cc == self.min_cc)

    def target(self, cc: int) -> str:
        """The NVRTC architecture to compile for on compute capability ``cc``: sm_90, or sm_90a."""
        return f"sm_{cc}a" if self.arch_specific else f"sm_{cc}"

    def check_cc(self, cc: int, where: str, hint: str = "") -> None:
        """Raise ConfigError when the template cannot run on compute capability ``cc`` (e.g. 75)."""
        if self.arch_specific and cc > self.min_cc:
            raise ConfigError(
                f"kernel {self.name!r} uses instructions of compute capability {self.min_cc // 10}.{self.min_cc % 10} "
                f"only (sm_{self.min_cc}a); {where} has {cc // 10}.{cc % 10}" + (f": {hint}" if hint else "")
            )
        if cc < self.min_cc:
            raise ConfigError(
                f"kernel {self.name!r} needs compute capability {self.min_cc // 10}.{self.min_cc % 10} or newer; "
                f"{where} has {cc // 10}.{cc % 10}" + (f": {hint}" if hint else "")
            )

    def threads(self, cfg: Config) -> int:
        x, y, z = self.block(cfg)
        return x * y * z


# Constraints shared by several rungs.
def positive(*names: str) -> list[Constraint]:
    return [Constraint(f"{n} >= 1", f"{n} must be at least 1") for n in names]


def at_most_1024_threads(threads_expr: str) -> Constraint:
    return Constraint(f"{threads_expr} <= 1024", "a CUDA block has at most 1024 threads")
