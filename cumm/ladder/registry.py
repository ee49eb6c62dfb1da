"""The kernel registry and the one way into it: :func:`register` (public as ``cumm.register``).

The ladder's rungs (``_ladder``) and a user's kernels are registered alike, and each is checked here before
anything can compile it: its name, its template (a readable file, or ``source``), its named and per-device
configurations and its defaults against its constraints, and its launch geometry on the defaults. Replacing
or removing a kernel forgets whatever the process memoized under its name (plans, calls, tuned answers), so
nothing stale runs afterwards; compiled kernels are keyed by the template's hash as well (``_compile``).
"""

from __future__ import annotations

import keyword
import operator
import re
import sys
import threading

from ..core.errors import ConfigError
from ..core.spec import KernelSpec
from ..runtime.render import supports_batch

REGISTRY: dict[str, KernelSpec] = {}
_BUILTIN: dict[str, KernelSpec] = {}  # the ladder's specs, restored when a replacement is unregistered
_lock = threading.Lock()

RESERVED = ("auto", "cublas", "pairwise")  # names matmul, bench and multi_dot give other meanings
KINDS = ("gemm", "chain", "grouped")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_PROBE = (256, 256, 256)  # M, N, K the grid is tried on


class RegistrationError(ValueError):
    """A spec cannot be registered: the message says what is wrong with it."""


def register(spec: KernelSpec, *, replace: bool = False) -> KernelSpec:
    """Add ``spec`` to the kernels cumm knows (``cumm.kernels()``), after checking it; returns it.

    A kernel of the same name is an error unless ``replace=True``. Registered kernels work wherever a rung does:
    ``cumm.matmul(..., kernel=name)``, ``cumm.compile``, ``cumm.tune``, ``cumm.check``, ``cumm.bench`` and the
    command line. After editing a template file in a running process, register its spec again with
    ``replace=True``: kernels compiled from the old text are not used any more.
    """
    return add(spec, replace=replace)


def unregister(name: str) -> None:
    """Remove kernel ``name`` registered with :func:`register` (a replaced rung gets its own spec back)."""
    with _lock:
        spec = REGISTRY.get(name)
        if spec is None:
            raise ValueError(f"no kernel named {name!r} is registered; the kernels are {list(REGISTRY)}")
        if spec is _BUILTIN.get(name):
            raise ValueError(
                f"{name!r} is one of cumm's own kernels and cannot be unregistered (replace it with "
                "cumm.register(spec, replace=True); unregistering the replacement restores it)"
            )
        if name in _BUILTIN:
            REGISTRY[name] = _BUILTIN[name]
        else:
            del REGISTRY[name]
    forget(name)


def add(spec: KernelSpec, *, replace: bool = False, builtin: bool = False) -> KernelSpec:
    """:func:`register`; ``builtin`` marks a rung of the ladder (which cannot be unregistered)."""
    if not isinstance(spec, KernelSpec):
        raise TypeError(f"cumm.register takes a cumm.KernelSpec, got {type(spec).__module__}.{type(spec).__name__}")
    validate(spec)
    object.__setattr__(spec, "batches", supports_batch(spec))  # a property of the spec, read where calls are planned
    with _lock:
        old = REGISTRY.get(spec.name)
        if old is not None and not replace:
            raise RegistrationError(
                f"a kernel named {spec.name!r} is already registered ({old.template}); pass replace=True to "
                "replace it, or choose another name"
            )
        REGISTRY[spec.name] = spec
        if builtin:
            _BUILTIN[spec.name] = spec
    if old is not None:
        forget(spec.name)
    return spec


def validate(spec: KernelSpec) -> None:
    """Raise RegistrationError (a ValueError) saying what is wrong with ``spec``, or return."""
    name = spec.name
    if not isinstance(name, str) or not _NAME.fullmatch(name) or keyword.iskeyword(name):
        raise RegistrationError(
            f"kernel name {name!r} must be an identifier (letters, digits, underscores; it becomes part of the "
            "CUDA function's name), e.g. 'my_double_buffer'"
        )
    if name in RESERVED:
        raise RegistrationError(
            f"kernel name {name!r} is reserved (cumm gives {', '.join(RESERVED)} other meanings); choose another name"
        )
    if spec.kind not in KINDS:
        raise RegistrationError(f"kernel {name!r}: kind must be one of {KINDS}, got {spec.kind!r}")
    if spec.workspace is not None and spec.tensor_maps is None:
        raise RegistrationError(
            f"kernel {name!r}: workspace= is passed only by the one-launch path of kernels with tensor maps; "
            "give tensor_maps= too, or drop workspace="
        )
    for p, v in spec.defaults.items():
        if not _NAME.fullmatch(str(p)):
            raise RegistrationError(f"kernel {name!r}: parameter name {p!r} must be an identifier (it is #defined)")
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise RegistrationError(f"kernel {name!r}: the default of {p} must be a non-negative int, got {v!r}")
    text = _template_text(spec)
    _check_parts(spec, text)
    _check_constraints(spec)
    _check_configs(spec)
    _check_geometry(spec)


def _template_text(spec: KernelSpec) -> str:
    what = f"kernel {spec.name!r}"
    if spec.source is not None:
        if not spec.source.strip():
            raise RegistrationError(f"{what}: source is empty")
        text = spec.source
    else:
        text = _read(spec.template, f"{what}: template")
    for h in spec.headers:
        _read(h, f"{what}: header")
    return text


def _read(path: str, what: str) -> str:
    from ..runtime.render import template_text

    try:
        return template_text(path)
    except FileNotFoundError:
        why = "does not exist"
    except (OSError, UnicodeDecodeError) as e:
        why = f"cannot be read ({type(e).__name__}: {e})"
    raise RegistrationError(
        f"{what} {path} {why} (a template or header is a path under cumm/kernels, else a "
        "file's path, absolute or relative to the working directory)"
    )


def _check_parts(spec: KernelSpec, text: str) -> None:
    from ..runtime.render import code_text

    code = code_text(text)
    if "CUMM_KERNEL" not in code:
        raise RegistrationError(
            f"kernel {spec.name!r}: the template {spec.template} does not name its kernel CUMM_KERNEL; declare it "
            'as extern "C" __global__ void CUMM_KERNEL(CUMM_GEMM_ARGS) (cumm #defines the name per configuration)'
        )
    if spec.split_k and "CUMM_SPLIT_K" not in code:
        raise RegistrationError(
            f"kernel {spec.name!r} declares split_k=True but its template {spec.template} does not call "
            "CUMM_SPLIT_K(BK) (first statement of the kernel); drop split_k or add the call"
        )


def _env(spec: KernelSpec, cfg) -> dict:
    env = dict(cfg)
    try:
        env.update(spec.derived(cfg))
    except Exception as e:
        raise RegistrationError(
            f"kernel {spec.name!r}: derived(...) fails on {dict(cfg)}: {type(e).__name__}: {e}"
        ) from None
    return env


def _check_constraints(spec: KernelSpec) -> None:
    env = _env(spec, spec.defaults)
    for c in spec.constraints:
        try:
            c.holds(env)
        except NameError as e:
            raise RegistrationError(
                f"kernel {spec.name!r}: constraint {c.expr!r} names something that is not a parameter "
                f"({e}); the parameters are {list(env)}"
            ) from None
        except ZeroDivisionError:
            pass  # a zero default: the constraint fails, which the check of the defaults reports
        except Exception as e:
            raise RegistrationError(
                f"kernel {spec.name!r}: constraint {c.expr!r} cannot be evaluated: {type(e).__name__}: {e}"
            ) from None
    bad = spec.violations(spec.defaults)
    if bad:
        raise RegistrationError(
            f"kernel {spec.name!r}: the defaults {dict(spec.defaults)} violate its constraints: " + "; ".join(bad)
        )


def _check_configs(spec: KernelSpec) -> None:
    for cc in spec.cc_defaults:
        bad = spec.violations(spec.default_config(cc))
        if bad:
            raise RegistrationError(
                f"kernel {spec.name!r}: cc_defaults[{cc}] violates its constraints: " + "; ".join(bad)
            )
    for cname in spec.configs:
        try:
            spec.resolve(cname)
        except ConfigError as e:
            raise RegistrationError(f"kernel {spec.name!r}: configuration {cname!r} is invalid: {e}") from None


def _dim3(value, what: str, spec: KernelSpec) -> tuple[int, int, int]:
    try:
        dims = tuple(operator.index(v) for v in value)
        if len(dims) != 3 or min(dims) < 1:
            raise ValueError
    except (TypeError, ValueError):
        raise RegistrationError(
            f"kernel {spec.name!r}: {what} must give three positive ints (x, y, z), got {value!r}"
        ) from None
    return dims  # type: ignore[return-value]


def _check_geometry(spec: KernelSpec) -> None:
    cfg = dict(spec.defaults)

    def call(what: str, fn, *args):
        try:
            return fn(*args)
        except Exception as e:
            raise RegistrationError(
                f"kernel {spec.name!r}: {what} fails on the defaults {cfg}: {type(e).__name__}: {e}"
            ) from None

    block = _dim3(call("block(cfg)", spec.block, cfg), "block(cfg)", spec)
    if block[0] * block[1] * block[2] > 1024:
        raise RegistrationError(
            f"kernel {spec.name!r}: block(cfg) = {block} on the defaults is "
            f"{block[0] * block[1] * block[2]} threads; a CUDA block has at most 1024"
        )
    _dim3(call("grid(cfg, M, N, K)", spec.grid, cfg, *_PROBE), "grid(cfg, M, N, K)", spec)
    smem = call("smem(cfg)", spec.smem, cfg)
    if isinstance(smem, bool) or not isinstance(smem, int) or smem < 0:
        raise RegistrationError(
            f"kernel {spec.name!r}: smem(cfg) must give a non-negative int (bytes of dynamic "
            f"shared memory), got {smem!r}"
        )


# Memoized state keyed by kernel name in modules that may not be imported yet (no import cycle: they import
# the registry, so they are looked up here at run time).
_CACHES = (
    ("cumm.plan.plan", "_plans"),
    ("cumm.api.matmul", "_calls"),
    ("cumm.tools.space", "_enumerated"),
    ("cumm.api.multi_dot", "_fast"),
    ("cumm.api.multi_dot", "_chosen"),
    ("cumm.plan.chain_plans", "_launches"),
)


def forget(name: str) -> None:
    """Drop what the process memoized for kernel ``name`` (called when it is replaced or unregistered)."""
    from ..runtime import render as _render

    _render.template_hash.cache_clear()
    getattr(_render, "supports_batch", _render.template_hash).cache_clear()
    for module, attr in _CACHES:
        cache = getattr(sys.modules.get(module), attr, None)
        if isinstance(cache, dict):
            cache.clear()
    compiled = getattr(sys.modules.get("cumm.runtime.compile"), "_kernels", None)
    if isinstance(compiled, dict):
        for key in [k for k in list(compiled) if k[0] == name]:
            compiled.pop(key, None)
    store = sys.modules.get("cumm.plan.store")
    if store is not None:
        store.clear_caches()  # tuned tables are filtered by the registered specs' template hashes
