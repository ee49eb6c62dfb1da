"""Errors for bad input that need no GPU: wrong array types, unknown kernels and parameters, violated
constraints, and importing cumm without CuPy."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import cumm
from cumm.plan import plan as _plan

REPO_ROOT = Path(__file__).resolve().parents[1]


def test_exception_hierarchy():
    assert issubclass(cumm.ConfigError, ValueError)
    assert issubclass(cumm.SharedMemoryError, ValueError)
    assert issubclass(cumm.CompileError, RuntimeError)
    e = cumm.CompileError("msg", log="the log", source="src")
    assert (str(e), e.log, e.source) == ("msg", "the log", "src")


# --------------------------------------------------------------------------------------------------
# cumm.matmul: host arrays are rejected before anything touches a GPU
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "make",
    [
        lambda: np.ones((4, 3), dtype=np.float32),
        lambda: np.ones((4, 3), dtype=np.float64),
        lambda: [[1.0, 2.0, 3.0]] * 4,
        lambda: ((1.0, 2.0, 3.0),) * 4,
        lambda: 3.0,
        lambda: None,
    ],
    ids=["numpy-f32", "numpy-f64", "list", "tuple", "scalar", "none"],
)
def test_matmul_rejects_host_operands(make):
    a = make()
    b = np.ones((3, 2), dtype=np.float32)
    with pytest.raises(TypeError, match=r"a must be a GPU array .*, got .*cupy\.asarray\(a\)"):
        cumm.matmul(a, b)
    with pytest.raises(TypeError, match=r"cupy\.asarray\(a\)"):
        cumm.matmul(a, b, kernel="naive")


def test_matmul_message_names_the_host_type():
    with pytest.raises(TypeError, match=r"got numpy\.ndarray"):
        cumm.matmul(np.ones((2, 2), np.float32), np.ones((2, 2), np.float32))
    with pytest.raises(TypeError, match=r"got builtins\.list"):
        cumm.matmul([[1.0]], [[1.0]])


def test_matmul_checks_operands_before_kernel_and_config():
    # the operand check comes first: an unknown kernel or bad config cannot mask it
    with pytest.raises(TypeError, match=r"cupy\.asarray"):
        cumm.matmul(np.ones((2, 2), np.float32), np.ones((2, 2), np.float32), kernel="nope", config={"X": 1})


# --------------------------------------------------------------------------------------------------
# Unknown kernels, unknown parameters, bad values, violated constraints
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("call", [cumm.kernel_spec, cumm.compile], ids=["kernel_spec", "compile"])
@pytest.mark.parametrize("name", ["nope", "Naive", "", "double-buffer"])
def test_unknown_kernel_lists_kernels(call, name):
    with pytest.raises(ValueError) as e:
        call(name)
    msg = str(e.value)
    assert f"unknown kernel {name!r}" in msg
    for k in cumm.kernels():
        assert repr(k) in msg, (k, msg)


def test_kernels_lists_the_ladder():
    names = cumm.kernels()
    assert names[:3] == ["naive", "coalesced", "smem"]
    assert "double_buffer" in names and len(names) == len(set(names))
    assert cumm.kernels("no such kind") == []


@pytest.mark.parametrize("kernel", ["naive", "blocktile_2d", "double_buffer"])
def test_unknown_config_key(kernel):
    spec = cumm.kernel_spec(kernel)
    with pytest.raises(cumm.ConfigError) as e:
        cumm.compile(kernel, {"NOT_A_PARAM": 4})
    msg = str(e.value)
    assert "NOT_A_PARAM" in msg and f"kernel {kernel!r}" in msg
    assert all(repr(p) in msg for p in spec.params), msg
    with pytest.raises(ValueError):  # ConfigError is a ValueError
        spec.resolve({"NOT_A_PARAM": 4})


@pytest.mark.parametrize("value", [-8, 16.0, "16", True, None])
def test_bad_config_value(value):
    with pytest.raises(cumm.ConfigError, match="BS must be a non-negative integer"):
        cumm.compile("smem", {"BS": value})


@pytest.mark.parametrize(
    ("kernel", "config", "expected"),
    [
        ("naive", {"BS": 0}, "BS must be at least 1 (needs BS >= 1; got BS=0)"),
        ("smem", {"BS": 64}, "a CUDA block has at most 1024 threads (needs BS * BS <= 1024; got BS=64)"),
        (
            "blocktile_1d",
            {"TM": 3},
            "TM divides BM: each thread owns TM whole rows (needs BM % TM == 0; got BM=64, TM=3)",
        ),
        (
            "warptile",
            {"NUM_THREADS": 100},
            "NUM_THREADS is a whole number of warps (needs NUM_THREADS % 32 == 0; got NUM_THREADS=100)",
        ),
        ("double_buffer", {"BK": 12}, "needs BK in (4, 8, 16, 32); got BK=12"),
    ],
)
def test_violated_constraint(kernel, config, expected):
    with pytest.raises(cumm.ConfigError) as e:
        cumm.compile(kernel, config)
    msg = str(e.value)
    assert msg.startswith(f"invalid configuration for kernel {kernel!r}: "), msg
    assert expected in msg, msg
    assert cumm.kernel_spec(kernel).violations({**cumm.kernel_spec(kernel).default_config(), **config})


# --------------------------------------------------------------------------------------------------
# Importing cumm without CuPy
# --------------------------------------------------------------------------------------------------


def test_import_without_cupy_names_the_extras():
    """``import cumm`` works without CuPy (so that ``cumm --help`` does); the API then says what to install."""
    code = textwrap.dedent(
        """
        import sys
        sys.modules["cupy"] = None  # makes `import cupy` raise ImportError
        import cumm
        try:
            cumm.matmul
        except ImportError as e:
            print("IMPORT-ERROR:", e)
            sys.exit(0)
        print("matmul without CuPy")
        sys.exit(1)
        """
    )
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    r = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=REPO_ROOT, timeout=120
    )
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout
    assert "IMPORT-ERROR:" in out and "CuPy" in out, out
    assert 'pip install ".[cuda12]"' in out and 'pip install ".[cuda13]"' in out, out


# ----------------------------------------------------------------------------------------------------------
# Kernels that need newer GPUs (KernelSpec.min_cc): a ConfigError naming both capabilities, before any compile
# ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kernel", [n for n, s in cumm.ladder.REGISTRY.items() if s.min_cc > 75])
def test_offline_compile_for_too_old_an_arch(kernel):
    need = cumm.ladder.REGISTRY[kernel].min_cc
    with pytest.raises(
        cumm.ConfigError,
        match=rf"needs compute capability {need // 10}\.{need % 10} or newer; "
        r"sm_75 has 7\.5",
    ):
        cumm.compile(kernel, arch="sm_75")


def test_matmul_plan_on_too_old_a_gpu(monkeypatch):
    monkeypatch.setattr(_plan, "compute_capability", lambda device_id: 75)
    monkeypatch.setattr(_plan, "_plans", {})  # a plan an earlier test made on this (newer) GPU is not asked
    with pytest.raises(
        cumm.ConfigError,
        match=r"'tf32x3' needs compute capability 8\.0.*device 0 has 7\.5: "
        r"use one of \[.*'warptile'.*\]",
    ) as e:
        _plan.get_plan("tf32x3", None, (1, 1, 1), 0)
    assert "tf32x3" not in str(e.value).split("use one of")[1]


def test_fused3_tc_on_too_old_a_gpu(monkeypatch):
    from cumm.plan import chain_plans as _chain

    monkeypatch.setattr(_chain, "compute_capability", lambda device_id: 75)
    with pytest.raises(cumm.ConfigError, match=r"'fused3_tc' needs compute capability 8\.0.*use kernel='fused3'"):
        _chain.plan("fused3_tc", "tc32x64", (1, 1, 1), 0, (8, 8, 8, 8, 8, 8, 8, 8))


@pytest.mark.parametrize("cc", [80, 100])
def test_fused3_wg_off_sm_90(monkeypatch, cc):
    from cumm.plan import chain_plans as _chain

    monkeypatch.setattr(_chain, "compute_capability", lambda device_id: cc)
    with pytest.raises(cumm.ConfigError, match=r"'fused3_wg'.*9\.0.*use kernel='fused3' or 'pairwise'"):
        _chain.plan("fused3_wg", "wg64x32", (1, 1, 1), 0, (8, 8, 8, 8, 8, 8, 8, 8))


@pytest.mark.parametrize("name", ["XA", "PA", "ST"])
def test_fused3_wg_removed_switches(name):
    """XA, PA and ST (k-loop variants that no named configuration used) are gone: a configuration that still
    names one is refused before compiling, with the kernel's parameters."""
    with pytest.raises(cumm.ConfigError, match=rf"has no parameter\(s\) \['{name}'\]; its parameters are"):
        cumm.kernel_spec("fused3_wg").resolve({name: 0}, 90)


@pytest.mark.parametrize(
    "over, message",
    [
        (dict(TMA=2), r"TMA is 0 .* or 1 .*TMA=2"),
        (dict(TMA=1, BK=24), r"BK is 8, 16, 32 or 64.*BK=24"),
        (dict(TMA=1, BM=128, BN=64, STAGES=6), r"at most 227 KB.*STAGES=6, TMA=1"),
        (dict(KW=3), r"KW is 1, 2 or 4: .*KW=3"),
        (dict(BM=256, KW=4), r"at most 1024 threads.*BM=256.*KW=4"),
        (dict(TMA=1, BM=128, BK=64, STAGES=2, KW=2), r"at most 227 KB.*KW=2"),
        (dict(RF=2), r"RF is 0 .* or 1 .*RF=2"),
        (dict(TMA=1, PC=2), r"PC is 0 .* or 1 .*PC=2"),
        (dict(TMA=0, PC=1), r"PC=1 copies C with the copy engine.*PC=1"),
        (dict(MN=2), r"MN is 0 .* or 1 .*MN=2"),
        (dict(BN=128, MN=1), r"use BN <= 64 with MN=1.*BN=128"),
    ],
)
def test_fused3_wg_tma_config(over, message):
    """TMA = 1 needs X's chunk rows to be one swizzle span and its own shared-memory budget (dense stages, a
    third split buffer, mbarriers); PC = 1 copies C with the copy engine (TMA = 1); K groups (KW) multiply the
    threads and the shared memory of a block; MN = 1's wgmma of N = 2 BN exists up to BN = 64; what breaks these
    is refused before compiling, with a message."""
    with pytest.raises(cumm.ConfigError, match=message):
        cumm.kernel_spec("fused3_wg").resolve(over, 90)


def test_fused3_wg_tma_needs_aligned_operands():
    """The copy engine reads 16-byte aligned operands only; multi_dot runs unaligned chains with TMA = 0, and a
    TMA = 1 kernel compiled for unaligned operands is refused by the template with the reason."""
    with pytest.raises(cumm.CompileError, match="TMA=1 copies 16-byte aligned operands only"):
        cumm.compile("fused3_wg", {"TMA": 1}, arch="sm_90", aligned=False)
