"""cumm.check: the odd-shape set, the report, the guard bands; on a GPU, a correct copy of a rung passes, an
off-by-one tail fails on exactly the shapes with a tail, a write past the output is caught by the guard values."""

from __future__ import annotations

from pathlib import Path

import pytest

import cumm
from cumm.tools import check as _check
from cumm.tools import cli as _cli
from cumm.tools import guard_bands as G
from cumm.tools.check import CheckReport, CheckRow

ROOT = Path(__file__).resolve().parent.parent
GEMM = ROOT / "cumm" / "kernels" / "gemm"
# smem's K loop, and an off-by-one version that stops before the last partial slab: right only when BS divides K
TAIL_OK = "for (int k0 = 0; k0 < K; k0 += BS)"
TAIL_BUG = "for (int k0 = 0; k0 + BS <= K; k0 += BS)"


@pytest.fixture(autouse=True)
def _forget_registrations(clean_registry):
    yield


def register_copy(tmp_path: Path, name: str, rung: str, edit=None, **over) -> cumm.KernelSpec:
    """``rung``'s template copied to tmp_path (edited) and registered as ``name`` with the rung's spec values."""
    base = cumm.kernel_spec(rung)
    text = (GEMM.parent / base.template).read_text()
    if edit is not None:
        edited = edit(text)
        assert edited != text, "the edit changed nothing"
        text = edited
    path = tmp_path / f"{name}.cu"
    path.write_text(text)
    fields = dict(
        name=name,
        template=str(path),
        summary=f"{rung}, edited",
        defaults=dict(base.defaults),
        block=base.block,
        grid=base.grid,
        smem=base.smem,
        constraints=list(base.constraints),
        derived=base.derived,
        space=dict(base.space),
        split_k=base.split_k,
        vector_loads=base.vector_loads,
        configs={k: dict(v) for k, v in base.configs.items()},
    )
    fields.update(over)
    return cumm.register(cumm.KernelSpec(**fields))


# ---------------------------------------------------------------------------------------------------
# No GPU needed
# ---------------------------------------------------------------------------------------------------


def test_standard_cases():
    cases = _check.standard_cases()
    shapes = {c.shape for c in cases}
    assert {(1, 1, 1), (127, 131, 137), (4097, 33, 65), (2048, 2048, 2048)} <= shapes
    assert any(c.K == 1 for c in cases) and any(c.K == 7 for c in cases)
    assert any(c.M == 1 for c in cases) and any(c.N == 1 for c in cases)
    assert any(c.layout == "view" for c in cases) and any(c.beta != 0 for c in cases)
    batched = [c for c in cases if c.batch]
    assert batched and any(c.layout == "broadcast" for c in batched) and any(c.beta != 0 for c in batched)
    assert not any(c.batch for c in _check.standard_cases(batches=False))
    assert not any(c.layout == "transposed" for c in cases)  # only for kernels that read transposed views
    both = _check.standard_cases(transposed=True)
    transposed = [c for c in both if c.layout == "transposed"]
    assert len(transposed) == len(_check.TRANSPOSED_CASES) and any(c.batch for c in transposed)
    assert any(c.K == 7 for c in transposed) and any(c.beta != 0 for c in transposed)
    assert not any(c.batch for c in _check.standard_cases(batches=False, transposed=True))
    small = _check.standard_cases(large=False)
    assert (2048, 2048, 2048) not in {c.shape for c in small} and (4097, 33, 65) in {c.shape for c in small}
    assert [c.shape for c in _check.standard_cases([(5, 6, 7), [8, 9, 10]])] == [(5, 6, 7), (8, 9, 10)]
    for bad in [(5, 6), (0, 1, 1), (1.5, 2, 3), (True, 2, 3)]:
        with pytest.raises(ValueError, match="three positive ints"):
            _check.standard_cases([bad])


def test_tolerances():
    assert _check.TOLERANCES["float32"] == 1e-5
    assert set(_check.TOLERANCES) == {"float32", "float16", "bfloat16"}


def test_report():
    ok = CheckRow("primes", (127, 131, 137), "float32", 3.1e-7, "ok", ran="naive")
    bad = CheckRow(
        "one past a tile",
        (4097, 33, 65),
        "float32",
        None,
        "FAIL",
        ["out-of-bounds write: 33 guard value(s) overwritten below C (rows past row M - 1)"],
    )
    report = CheckReport("mine", {"BS": 16}, "NVIDIA H200", [ok, bad])
    assert not report.ok and report.failures == [bad]
    text = str(report)
    assert text.splitlines()[0] == "cumm.check mine BS=16 on NVIDIA H200: 1 of 2 FAILED"
    assert "3.1e-07" in text and "4097x33x65" in text
    assert "FAIL one past a tile 4097x33x65 float32: out-of-bounds write: 33 guard value(s)" in text
    good = CheckReport("mine", None, "GPU", [ok])
    assert good.ok and str(good).splitlines()[0] == "cumm.check mine on GPU: ok"
    assert not CheckReport("mine", None, "GPU", []).ok


def test_check_validates_before_the_gpu():
    with pytest.raises(cumm.ConfigError, match="at most 1024 threads"):
        cumm.check("naive", {"BS": 64})
    with pytest.raises(ValueError, match="chain kernel"):
        cumm.check("fused3")
    with pytest.raises(ValueError, match="unknown kernel"):
        cumm.check("nope")
    with pytest.raises(ValueError, match="dtype 'float64'"):
        cumm.check("naive", dtypes=["float64"])


def test_check_takes_the_registered_spec_only(tmp_path):
    spec = register_copy(tmp_path, "copy_n", "naive")
    other = cumm.KernelSpec(
        name="copy_n", template=spec.template, summary="", defaults=dict(BS=8), block=spec.block, grid=spec.grid
    )
    with pytest.raises(ValueError, match="not the registered one"):
        cumm.check(other)


def _no_gpu() -> bool:
    from cumm.runtime.timing import gpu_unavailable

    return gpu_unavailable() is not None


@pytest.mark.skipif(not _no_gpu(), reason="checks what happens without a GPU")
def test_check_without_a_gpu():
    with pytest.raises(RuntimeError, match=r"cumm.check runs the kernel on an NVIDIA GPU .*cumm.compile"):
        cumm.check("naive")


def test_sanitizer_command(monkeypatch):
    import shutil
    import sys

    monkeypatch.setattr(shutil, "which", lambda name: None)
    assert _check.sanitizer_command(["check"]) is None
    monkeypatch.setattr(shutil, "which", lambda name: "/usr/local/cuda/bin/compute-sanitizer")
    cmd = _check.sanitizer_command(["check", "--kernel", "naive"])
    assert cmd[:3] == ["/usr/local/cuda/bin/compute-sanitizer", "--tool", "memcheck"]
    assert cmd[cmd.index(sys.executable) :] == [sys.executable, "-m", "cumm", "check", "--kernel", "naive"]


def test_cli_check_parses_config_and_shapes():
    args = _cli.build_parser().parse_args(
        ["check", "--kernel", "smem", "--config", "BS=16", "--shapes", "5x6x7,8x9x10"]
    )
    assert args.kernel == ["smem"] and args.config == {"BS": 16} and args.shapes == [(5, 6, 7), (8, 9, 10)]
    for bad in ("BS", "BS=x", "=4"):
        with pytest.raises(SystemExit):
            _cli.build_parser().parse_args(["check", "--kernel", "smem", "--config", bad])


# ---------------------------------------------------------------------------------------------------
# On a GPU
# ---------------------------------------------------------------------------------------------------


@pytest.mark.gpu
def test_guard_bands_layout():
    import cupy

    buf, c = G.guarded_out(5, 7, cupy.dtype("float32"), odd=False)
    assert c.shape == (5, 7) and c.strides[1] == 4 and (c.strides[0] // 4) % 4 == 0 and c.data.ptr % 16 == 0
    assert buf.shape[0] == 5 + 2 * G.GUARD_ROWS
    buf2, c2 = G.guarded_out(5, 7, cupy.dtype("float32"), odd=True)
    assert (c2.strides[0] // 4) % 4 != 0
    sentinel = buf[0, 0].copy()
    assert G.guard_problems(buf, 5, 7, sentinel) == []
    buf[G.GUARD_ROWS + 2, G.GUARD_COLS + 7] = 1.0  # one past the end of row 2
    buf[-1, 0] = 2.0
    problems = G.guard_problems(buf, 5, 7, sentinel)
    assert any("below C" in p for p in problems) and any("right of C" in p for p in problems)
    buf3, c3 = G.guarded_out(5, 7, cupy.dtype("float16"), odd=False, batch=3)  # a guarded matrix a product
    assert c3.shape == (3, 5, 7) and buf3.shape[0] == 3 and c3.strides[0] == buf3.strides[0]
    assert G.guard_problems(buf3, 5, 7, buf3[0, 0, 0].copy()) == []
    buf3[2, 0, G.GUARD_COLS] = 0.0  # above product 2's C
    assert any("above C" in p for p in G.guard_problems(buf3, 5, 7, buf3[0, 0, 0].copy()))


@pytest.mark.gpu
def test_a_rung_passes():
    report = cumm.check("smem")
    assert report.ok, str(report)
    assert len(report.rows) == len(_check.STANDARD_CASES)
    assert all(r.rel_err is not None and r.rel_err < 1e-5 for r in report.rows)


@pytest.mark.gpu
def test_batched_cases_run_where_the_kernel_runs_batches(sm90):
    """wgmma_ws runs batches (its own schedule over the batch's tiles) and mma over grid z: the batched cases run and
    pass for both."""
    report = cumm.check("wgmma_ws", dtypes=["bfloat16"], large=False)
    assert report.ok, str(report)
    assert {"batch of 3", "batch, a broadcast"} <= {r.case for r in report.rows}
    # wgmma_ws reads column-major operands in place: its report has the transposed cases
    assert {c.name for c in _check.TRANSPOSED_CASES} <= {r.case for r in report.rows}
    report = cumm.check("mma", dtypes=["float16"], large=False)
    assert report.ok, str(report)
    assert {"batch of 3", "batch, a broadcast"} <= {r.case for r in report.rows}


@pytest.mark.gpu
def test_an_off_by_one_tail_is_reported_with_its_shapes(tmp_path):
    # the K loop stops before the last partial slab: right only when BS divides K
    register_copy(tmp_path, "tail_bug", "smem", lambda t: t.replace(TAIL_OK, TAIL_BUG))
    report = cumm.check("tail_bug", {"BS": 32})
    assert not report.ok
    failed = {r.case for r in report.failures}
    assert {"1x1x1", "primes", "one past a tile", "K = 1", "K = 7", "unaligned views"} <= failed
    assert "2048 cube" not in failed  # K = 2048: no tail
    text = str(report)
    assert "FAIL primes 127x131x137 float32: relative error" in text
    assert all(r.verdict == "FAIL" and r.problems for r in report.failures)


@pytest.mark.gpu
def test_a_write_past_the_output_is_caught_by_the_guard_bands(tmp_path):
    register_copy(
        tmp_path,
        "oob",
        "naive",
        lambda t: t.replace("float* c = C + (i64)m * ldc + n;", "float* c = C + (i64)m * ldc + n + 1;"),
    )
    report = cumm.check("oob", shapes=[(127, 131, 137), (64, 64, 64)])
    assert not report.ok
    for r in report.rows:
        assert any(p.startswith("out-of-bounds write:") and "right of C" in p for p in r.problems), r.problems
        assert any("never written" in p for p in r.problems)  # column 0 is never written
    assert "out-of-bounds write" in str(report)


@pytest.mark.gpu
def test_unwritten_rows_are_located(tmp_path):
    register_copy(
        tmp_path,
        "skip_last",
        "naive",
        lambda t: t.replace("if (m >= M || n >= N) return;", "if (m >= M - 1 || n >= N) return;"),
    )
    report = cumm.check("skip_last", shapes=[(127, 131, 137)])
    (row,) = report.rows
    assert row.verdict == "FAIL"
    assert "131 of 16637 elements NaN or Inf (never written?) in rows 126, columns 0..130" in row.problems[0]


@pytest.mark.gpu
def test_cli_check_of_a_kernel_file(tmp_path, capsys):
    from cumm.tools.new import new

    _, py = new("cli_ok", "smem", tmp_path)
    assert _cli.main(["check", "--kernel-file", str(py), "--shapes", "127x131x137,1x1x1"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("cumm.check cli_ok on ") and ": ok" in out.splitlines()[0]
    cu = tmp_path / "cli_ok" / "kernel.cu"
    cu.write_text(cu.read_text().replace(TAIL_OK, TAIL_BUG))
    assert _cli.main(["check", "--kernel-file", str(py), "--shapes", "127x131x137"]) == 1
    assert "FAIL 127x131x137 127x131x137 float32: relative error" in capsys.readouterr().out
