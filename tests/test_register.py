"""Kernels from outside the package: cumm.register / unregister, every registration error, kernel_source, cumm new,
offline compiles of a user's template (and NVRTC's messages naming its file and line), the command line's
--kernel-file; on a GPU, a rung copied to a temporary directory, one default changed, checked, raced and tuned."""

from __future__ import annotations

import hashlib
import importlib.util
import shutil
import sys
from pathlib import Path

import pytest

import cumm
from cumm.ladder import registry as _register
from cumm.plan import plan as _plan
from cumm.runtime import compile as _compile
from cumm.runtime import render as _render
from cumm.tools import cli as _cli
from cumm.tools.new import new, spec_file

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "cumm"
NAIVE = PACKAGE / "kernels" / "gemm" / "01_naive" / "kernel.cu"


@pytest.fixture(autouse=True)
def _forget_registrations(clean_registry):
    yield


def naive_like(name: str, template, **over) -> cumm.KernelSpec:
    base = cumm.kernel_spec("naive")
    fields = dict(
        name=name,
        template=str(template),
        summary="a copy of naive",
        defaults=dict(BS=16),
        block=base.block,
        grid=base.grid,
        constraints=list(base.constraints),
        space=dict(BS=(8, 16)),
    )
    fields.update(over)
    return cumm.KernelSpec(**fields)


def copy_naive(tmp_path: Path, name: str = "mine.cu", edit=None) -> Path:
    text = NAIVE.read_text()
    if edit is not None:
        new_text = edit(text)
        assert new_text != text, "the edit changed nothing"
        text = new_text
    path = tmp_path / name
    path.write_text(text)
    return path


def package_digest() -> str:
    h = hashlib.sha256()
    for p in sorted(PACKAGE.rglob("*")):
        if p.is_file() and "__pycache__" not in p.parts:
            h.update(str(p.relative_to(PACKAGE)).encode() + b"\0" + p.read_bytes())
    return h.hexdigest()


# ---------------------------------------------------------------------------------------------------
# Registration
# ---------------------------------------------------------------------------------------------------


def test_the_ladder_is_registered_through_the_same_path():
    assert list(_register.REGISTRY)[:10] == [
        "naive",
        "coalesced",
        "smem",
        "blocktile_1d",
        "blocktile_2d",
        "vectorized",
        "bank_conflict_free",
        "warptile",
        "double_buffer",
        "tf32x3",
    ]
    assert all(_register._BUILTIN[n] is s for n, s in _register.REGISTRY.items())
    import cumm.ladder

    assert cumm.ladder.REGISTRY is _register.REGISTRY


def test_register_a_template_file(tmp_path):
    path = copy_naive(tmp_path)
    spec = cumm.register(naive_like("mine", path))
    assert spec.template == str(path)
    assert "mine" in cumm.kernels() and cumm.kernel_spec("mine") is spec
    assert cumm.kernel_source("mine") == path.read_text()
    assert spec.dtypes == ("float32",)
    name, source = _render.render(spec, spec.resolve())
    assert f'#line 1 "{path}"' in source and name == "cumm_mine_BS16_v111"
    cumm.unregister("mine")
    assert "mine" not in cumm.kernels()


def test_relative_template_path_is_taken_from_the_working_directory(tmp_path, monkeypatch):
    (tmp_path / "sub").mkdir()
    copy_naive(tmp_path / "sub", "rel.cu")
    monkeypatch.chdir(tmp_path)
    spec = cumm.register(naive_like("rel", "sub/rel.cu"))
    assert spec.template == str(tmp_path / "sub" / "rel.cu")
    monkeypatch.chdir(ROOT)  # the spec keeps the absolute path
    assert cumm.kernel_source("rel") == NAIVE.read_text()


def test_a_package_path_names_a_rung_template():
    spec = cumm.register(naive_like("naive16", "gemm/01_naive/kernel.cu"))
    assert spec.template == "gemm/01_naive/kernel.cu"
    assert _render.template_hash(spec) == _render.template_hash(cumm.kernel_spec("naive"))


def test_register_a_source_string():
    spec = cumm.register(naive_like("from_text", "", source=NAIVE.read_text()))
    assert spec.template == "from_text.cu"
    assert cumm.kernel_source("from_text") == NAIVE.read_text()
    assert '#line 1 "from_text.cu"' in _render.render(spec, spec.resolve())[1]
    assert "source=" not in repr(spec) and len(repr(spec)) < 600


def test_duplicate_name_needs_replace(tmp_path):
    path = copy_naive(tmp_path)
    first = cumm.register(naive_like("dup", path))
    with pytest.raises(ValueError, match=r"already registered.*replace=True"):
        cumm.register(naive_like("dup", path))
    assert cumm.kernel_spec("dup") is first
    second = cumm.register(naive_like("dup", path, defaults=dict(BS=8)), replace=True)
    assert cumm.kernel_spec("dup") is second and cumm.kernels().count("dup") == 1


def test_replace_forgets_what_was_memoized(tmp_path, monkeypatch):

    path = copy_naive(tmp_path)
    spec = cumm.register(naive_like("stale", path))
    h1 = _render.template_hash(spec)
    monkeypatch.setitem(_plan._plans, ("stale", None, (1, 1, 1), 0), object())
    monkeypatch.setitem(_compile._kernels, ("stale", h1, (16,), (1, 1, 1), 0), object())
    monkeypatch.setitem(_compile._kernels, ("naive", "x", (32,), (1, 1, 1), 0), "kept")
    path.write_text(path.read_text().replace("float acc = 0.0f;", "float acc = 0.0f;  float unused = 1.0f;"))
    cumm.register(spec, replace=True)  # the same spec object, the file edited
    assert _render.template_hash(spec) != h1
    assert not _plan._plans or all(k[0] != "stale" for k in _plan._plans)
    assert all(k[0] != "stale" for k in _compile._kernels)
    assert _compile._kernels[("naive", "x", (32,), (1, 1, 1), 0)] == "kept"


def test_device_kernel_cache_key_holds_the_template_hash():
    import inspect

    src = inspect.getsource(_compile.device_kernel)
    assert "template_hash(spec)" in src


def test_unregister(tmp_path):
    with pytest.raises(ValueError, match="no kernel named 'nothing'"):
        cumm.unregister("nothing")
    with pytest.raises(ValueError, match="cumm's own kernels"):
        cumm.unregister("naive")
    original = cumm.kernel_spec("smem")
    mine = cumm.register(naive_like("smem", copy_naive(tmp_path)), replace=True)
    assert cumm.kernel_spec("smem") is mine and cumm.kernels().index("smem") == 2
    cumm.unregister("smem")  # the rung comes back
    assert cumm.kernel_spec("smem") is original


def test_a_registered_half_kernel_is_not_auto_s_choice():
    """auto's rung for a half dtype is the ladder's highest that takes it, not the kernel registered last."""
    import dataclasses

    from cumm.plan import auto as _auto

    before = {cc: _auto.top(cc, dtype="bfloat16") for cc in (80, 90)}
    assert before == {80: "mma_swizzled_pipeline", 90: "wgmma_ws"}
    cumm.register(dataclasses.replace(cumm.kernel_spec("mma"), name="my_mma"))
    assert {cc: _auto.top(cc, dtype="bfloat16") for cc in (80, 90)} == before


def _error(tmp_path, match, exc=ValueError, **over):
    path = copy_naive(tmp_path)
    with pytest.raises(exc, match=match):
        cumm.register(naive_like(over.pop("name", "bad"), over.pop("template", path), **over))
    assert "bad" not in cumm.kernels()


@pytest.mark.parametrize("name", ["my-kernel", "2fast", "", "class", "has space"])
def test_name_must_be_an_identifier(tmp_path, name):
    _error(tmp_path, "must be an identifier", name=name)


@pytest.mark.parametrize("name", ["auto", "cublas", "pairwise"])
def test_reserved_names(tmp_path, name):
    _error(tmp_path, "is reserved", name=name)


def test_missing_template(tmp_path):
    _error(tmp_path, r"template .*nope\.cu does not exist", template=tmp_path / "nope.cu")


def test_missing_header(tmp_path):
    _error(tmp_path, r"header .*missing\.cuh does not exist", headers=(str(tmp_path / "missing.cuh"),))


def test_template_must_name_its_kernel(tmp_path):
    path = tmp_path / "anon.cu"
    path.write_text('extern "C" __global__ void my_gemm(CUMM_GEMM_ARGS) {}\n// CUMM_KERNEL in a comment\n')
    _error(tmp_path, "does not name its kernel CUMM_KERNEL", template=path)


def test_empty_source(tmp_path):
    _error(tmp_path, "source is empty", template="", source="  \n")


def test_split_k_needs_the_macro(tmp_path):
    _error(
        tmp_path,
        r"split_k=True but its template .* does not call CUMM_SPLIT_K",
        split_k=True,
        defaults=dict(BS=16, BK=16),
    )


def test_a_workspace_needs_tensor_maps(tmp_path):
    _error(tmp_path, r"workspace= is passed only .* tensor maps", workspace=lambda cfg, M, N, K, blocks: 0)


def test_defaults_must_satisfy_the_constraints(tmp_path):
    _error(
        tmp_path,
        r"defaults \{'BS': 64\} violate.*at most 1024 threads \(needs BS \* BS <= 1024; got BS=64\)",
        defaults=dict(BS=64),
    )


def test_constraint_naming_an_unknown_parameter(tmp_path):
    _error(
        tmp_path,
        r"constraint 'BX <= 4' names something that is not a parameter",
        constraints=[cumm.Constraint("BX <= 4", "typo")],
    )


def test_bad_default_values(tmp_path):
    _error(tmp_path, "default of BS must be a non-negative int", defaults=dict(BS=16.0))
    _error(tmp_path, "default of BS must be a non-negative int", defaults=dict(BS=-1))
    _error(
        tmp_path,
        "parameter name 'B S' must be an identifier",
        defaults={"B S": 1},
        space={},
        constraints=[],
        block=lambda c: (1, 1, 1),
    )


def test_named_configuration_must_be_valid(tmp_path):
    _error(tmp_path, r"configuration 'big' is invalid", configs={"big": dict(BS=64)})


def test_cc_defaults_must_be_valid(tmp_path):
    _error(tmp_path, r"cc_defaults\[90\] violates", cc_defaults={90: dict(BS=128)})


def test_geometry_errors(tmp_path):
    _error(tmp_path, r"block\(cfg\) fails on the defaults .*KeyError: 'BX'", block=lambda c: (c["BX"], 1, 1))
    _error(tmp_path, r"block\(cfg\) must give three positive ints", block=lambda c: (c["BS"], 1))
    _error(tmp_path, r"block\(cfg\) = \(2048, 1, 1\) .*at most 1024", block=lambda c: (2048, 1, 1))
    _error(tmp_path, r"grid\(cfg, M, N, K\) fails", grid=lambda c: (1, 1, 1))
    _error(tmp_path, r"grid\(cfg, M, N, K\) must give three positive ints", grid=lambda c, M, N, K: (0, 1, 1))
    _error(tmp_path, r"smem\(cfg\) must give a non-negative int", smem=lambda c: -4)


def test_kind(tmp_path):
    _error(tmp_path, "kind must be one of", kind="conv")


def test_spec_field_errors(tmp_path):
    with pytest.raises(ValueError, match="give template= .* or source="):
        naive_like("x", "")
    with pytest.raises(ValueError, match="dtypes must be a non-empty tuple of float32, float16, bfloat16"):
        naive_like("x", copy_naive(tmp_path), dtypes=("float64",))
    with pytest.raises(ValueError, match="dtypes must be"):
        naive_like("x", copy_naive(tmp_path), dtypes=())
    assert naive_like("x", copy_naive(tmp_path), dtypes=["float16", "bfloat16"]).dtypes == ("float16", "bfloat16")
    assert naive_like("x", copy_naive(tmp_path), dtypes="float16").dtypes == ("float16",)
    for field in ("race_max_m", "epilogue_max_k"):
        for bad in (-1, "2048", 1.5):
            with pytest.raises(ValueError, match=f"{field} must be an int >= 0"):
                naive_like("x", copy_naive(tmp_path), **{field: bad})
    with pytest.raises(ValueError, match="epilogue_shapes must be a callable"):
        naive_like("x", copy_naive(tmp_path), epilogue_shapes=2048)
    assert naive_like("x", copy_naive(tmp_path), epilogue_shapes=lambda m, n, k, s: k <= 4096).epilogue_shapes
    with pytest.raises(TypeError, match="takes a cumm.KernelSpec"):
        cumm.register(dict(name="x"))


def test_kernel_source_of_every_rung():
    for name in [*cumm.kernels(), *cumm.kernels("chain")]:
        spec = cumm.kernel_spec(name)
        assert cumm.kernel_source(name) == (PACKAGE / "kernels" / spec.template).read_text()
    with pytest.raises(ValueError, match="unknown kernel"):
        cumm.kernel_source("nope")


# ---------------------------------------------------------------------------------------------------
# Offline compiles of a user's template
# ---------------------------------------------------------------------------------------------------


def test_offline_compile_of_a_registered_kernel(tmp_path, monkeypatch):
    path = copy_naive(tmp_path)
    monkeypatch.chdir(tmp_path)
    cumm.register(naive_like("offline", "mine.cu"))
    k = cumm.compile("offline", arch="sm_90")
    assert k.kernel == "offline" and k.name == "cumm_offline_BS16_v111" and k.registers > 0 and k.cubin
    k8 = cumm.compile("offline", {"BS": 8}, arch="sm_80", aligned=False)
    assert k8.threads == 64 and k8.name.endswith("_v000")
    assert path.exists()


def test_syntax_error_names_the_users_file_and_line(tmp_path):
    path = copy_naive(tmp_path, "typo.cu", lambda t: t.replace("float acc = 0.0f;", "float acc = 0.0f oops;"))
    line = next(i for i, x in enumerate(path.read_text().splitlines(), 1) if "oops" in x)
    cumm.register(naive_like("typo", path))
    with pytest.raises(cumm.CompileError) as e:
        cumm.compile("typo", arch="sm_90")
    assert f"{path}({line}): error" in str(e.value), str(e.value)
    assert f"{path}({line}): error" in e.value.log


def test_source_string_errors_name_the_template(tmp_path):
    cumm.register(naive_like("texty", "", source=NAIVE.read_text().replace("acc += ", "acc +=+ undefined_x * ")))
    with pytest.raises(cumm.CompileError, match=r"texty\.cu\(\d+\): error"):
        cumm.compile("texty", arch="sm_90")


# ---------------------------------------------------------------------------------------------------
# cumm new
# ---------------------------------------------------------------------------------------------------


def load(py: Path):
    spec = importlib.util.spec_from_file_location(py.stem, py)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("rung", cumm.kernels())
def test_new_from_every_rung(tmp_path, rung):
    cu, py = new(f"my_{rung}", rung, tmp_path)
    assert cu == tmp_path / f"my_{rung}" / "kernel.cu" and py == tmp_path / f"my_{rung}" / "spec.py"
    first, rest = cu.read_text().split("\n", 1)
    assert first.startswith(f"// my_{rung}: copied from cumm's {rung} rung (gemm/") and rest == cumm.kernel_source(rung)
    module = load(py)
    mine, theirs = cumm.kernel_spec(f"my_{rung}"), cumm.kernel_spec(rung)
    assert module.SPEC is mine and mine.template == str(cu)
    assert dict(mine.defaults) == dict(theirs.defaults) and dict(mine.space) == dict(theirs.space)
    assert [(c.expr, c.message) for c in mine.constraints] == [(c.expr, c.message) for c in theirs.constraints]
    assert {k: dict(v) for k, v in mine.configs.items()} == {k: dict(v) for k, v in theirs.configs.items()}
    for f in (
        "split_k",
        "vector_loads",
        "stage_out",
        "min_cc",
        "headers",
        "dtypes",
        "arch_specific",
        "persistent",
        "fallback",
    ):
        assert getattr(mine, f) == getattr(theirs, f), f
    assert (mine.tensor_maps is None) == (theirs.tensor_maps is None)
    if theirs.tensor_maps is not None:
        cfg = theirs.default_config(90)
        args = (cfg, 512, 256, 128, 128, 256, 256, True)
        assert repr(mine.tensor_maps(*args)) == repr(theirs.tensor_maps(*args))
    assert (mine.workspace is None) == (theirs.workspace is None)  # the kernel's last argument: both or neither
    for cfg in [theirs.default_config(), *(theirs.resolve(c) for c in theirs.configs)]:
        assert mine.block(cfg) == theirs.block(cfg) and mine.smem(cfg) == theirs.smem(cfg)
        assert mine.grid(cfg, 1000, 3000, 77) == theirs.grid(cfg, 1000, 3000, 77)
        if theirs.workspace is not None:
            assert mine.workspace(cfg, 2112, 4096, 999, 132) == theirs.workspace(cfg, 2112, 4096, 999, 132)
        assert mine.derived(cfg) == theirs.derived(cfg)
    assert (mine.top, mine.raced) == (theirs.top, theirs.raced)
    assert (mine.shape_config is None) == (theirs.shape_config is None)
    assert "cumm.register(SPEC" in py.read_text()
    assert _render.template_hash(mine) == _render.template_hash(theirs)  # only the header comment differs


def test_new_compiles_and_a_changed_default_is_used(tmp_path):
    cu, py = new("exp_db", "double_buffer", tmp_path)
    text = py.read_text()
    py.write_text(text.replace("BK=8, WN=64", "BK=16, WN=64", 1))
    load(py)
    assert cumm.kernel_spec("exp_db").defaults["BK"] == 16
    k = cumm.compile("exp_db", arch="sm_90")
    assert "BK16" in k.name and k.dynamic_shared_bytes == 2 * 16 * (128 + 256) * 4 and k.spill_bytes == 0


def test_new_refuses_to_overwrite(tmp_path):
    cu, py = new("twice", "smem", tmp_path)
    cu.write_text("// mine\n")
    with pytest.raises(FileExistsError, match="already exist.*--force"):
        new("twice", "smem", tmp_path)
    assert cu.read_text() == "// mine\n"
    py.unlink()
    with pytest.raises(FileExistsError, match=r"kernel\.cu already exists"):
        new("twice", "naive", tmp_path)
    new("twice", "naive", tmp_path, force=True)
    assert "copied from cumm's naive rung" in cu.read_text() and py.exists()


def test_new_rejects_bad_names_and_rungs(tmp_path):
    with pytest.raises(ValueError, match="must be an identifier"):
        new("my-kernel", "smem", tmp_path)
    with pytest.raises(ValueError, match="must be an identifier"):
        new("auto", "smem", tmp_path)
    with pytest.raises(ValueError, match="unknown kernel"):
        new("x", "nope", tmp_path)
    with pytest.raises(ValueError, match="chain kernel; start from a GEMM rung"):
        new("x", "fused3", tmp_path)
    assert not list(tmp_path.iterdir())


def test_spec_file_of_a_registered_kernel_reuses_its_geometry(tmp_path):
    """A kernel that is not a ladder rung (a user's) gives a file that takes its geometry from the spec."""
    cumm.register(naive_like("user_one", copy_naive(tmp_path)))
    code = spec_file("second", cumm.kernel_spec("user_one"))
    assert '_RUNG = cumm.kernel_spec("user_one")' in code and "block=_RUNG.block" in code
    compile(code, "second.py", "exec")


# ---------------------------------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------------------------------


def test_cli_new(tmp_path, capsys):
    assert _cli.main(["new", "cli_db", "--from", "double_buffer", "--dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert (tmp_path / "cli_db" / "kernel.cu").exists() and (tmp_path / "cli_db" / "spec.py").exists()
    assert "check --kernel-file" in out and "bench --kernel-file" in out and "--kernels double_buffer,cli_db" in out
    assert _cli.main(["new", "cli_db", "--dir", str(tmp_path)]) == 2
    assert "--force" in capsys.readouterr().err
    assert _cli.main(["new", "cli_db", "--from", "smem", "--dir", str(tmp_path), "--force"]) == 0
    assert _cli.main(["new", "cli-db", "--dir", str(tmp_path)]) == 2


def _no_gpu():
    from cumm.runtime.timing import gpu_unavailable

    return gpu_unavailable() is not None


def test_cli_kernel_file_names_are_valid_kernels(tmp_path, capsys):
    _, py = new("cli_k", "smem", tmp_path)
    argv = ["bench", "--kernel-file", str(py), "--kernels", "smem,cli_k", "--sizes", "64"]
    assert _cli._kernel_files(argv) == [str(py)]
    assert _cli._kernel_files(["tune", "--kernel", "x", "--kernel-file=f.py"]) == ["f.py"]
    assert _cli.load_kernel_files([str(py)]) == ["cli_k"]
    args = _cli.build_parser().parse_args(argv)
    assert args.kernels == ["smem", "cli_k"] and args.kernel_file == [str(py)]
    args = _cli.build_parser().parse_args(
        ["tune", "--kernel", "cli_k", "--shape", "64x64x64", "--kernel-file", str(py)]
    )
    assert args.kernel == "cli_k"


def test_cli_tune_plan_of_a_kernel_file(tmp_path, capsys):
    _, py = new("cli_t", "blocktile_1d", tmp_path)
    rc = _cli.main(
        [
            "tune",
            "--kernel-file",
            str(py),
            "--kernel",
            "cli_t",
            "--shape",
            "512x512x512",
            "--plan",
            "--no-compile",
            "--max-configs",
            "2",
        ]
    )
    assert rc == 0, capsys.readouterr()
    assert "cli_t 512x512x512: 2 candidates" in capsys.readouterr().out


def test_cli_without_the_kernel_file_rejects_its_kernel(capsys):
    with pytest.raises(SystemExit) as e:
        _cli.main(["bench", "--kernels", "not_loaded"])
    assert e.value.code == 2 and "unknown kernel 'not_loaded'" in capsys.readouterr().err


def test_cli_broken_kernel_file(tmp_path, capsys):
    bad = tmp_path / "bad.py"
    bad.write_text("import cumm\nraise RuntimeError('my mistake')\n")
    with pytest.raises(SystemExit) as e:
        _cli.main(["check", "--kernel-file", str(bad)])
    err = capsys.readouterr().err
    assert e.value.code == 2 and "could not load kernel file" in err and "my mistake" in err
    with pytest.raises(SystemExit) as e:
        _cli.main(["check", "--kernel-file", str(tmp_path / "missing.py")])
    assert e.value.code == 2 and "does not exist" in capsys.readouterr().err


def test_cli_check_needs_a_kernel(tmp_path, capsys):
    empty = tmp_path / "empty.py"
    empty.write_text("")
    with pytest.raises(SystemExit) as e:
        _cli.main(["check", "--kernel-file", str(empty)])
    assert e.value.code == 2 and "give --kernel" in capsys.readouterr().err


@pytest.mark.skipif(not _no_gpu(), reason="checks what happens without a GPU")
def test_cli_check_and_bench_without_a_gpu(tmp_path, capsys):
    _, py = new("cli_c", "smem", tmp_path)
    assert _cli.main(["check", "--kernel-file", str(py)]) == 1
    err = capsys.readouterr().err
    assert "cumm.check runs the kernel on an NVIDIA GPU" in err and "cumm.compile" in err
    assert _cli.main(["bench", "--kernel-file", str(py), "--kernels", "smem,cli_c", "--sizes", "64"]) == 1
    assert "the benchmark needs an NVIDIA GPU" in capsys.readouterr().err


def test_cli_check_sanitize_without_compute_sanitizer(tmp_path, capsys, monkeypatch):
    _, py = new("cli_s", "naive", tmp_path)
    monkeypatch.setattr(shutil, "which", lambda name: None)
    monkeypatch.delenv("CUMM_UNDER_SANITIZER", raising=False)
    assert _cli.main(["check", "--kernel-file", str(py), "--sanitize"]) == 2
    assert "compute-sanitizer is not installed" in capsys.readouterr().err


def test_cli_check_sanitize_reruns_itself(tmp_path, monkeypatch):
    import subprocess

    _, py = new("cli_r", "naive", tmp_path)
    monkeypatch.setattr(shutil, "which", lambda name: "/opt/cuda/bin/compute-sanitizer")
    monkeypatch.delenv("CUMM_UNDER_SANITIZER", raising=False)
    seen = {}

    def fake_run(cmd, env):
        seen.update(cmd=cmd, env=env)
        return subprocess.CompletedProcess(cmd, 0)

    monkeypatch.setattr(subprocess, "run", fake_run)
    assert _cli.main(["check", "--kernel-file", str(py), "--sanitize", "--kernel", "cli_r"]) == 0
    cmd = seen["cmd"]
    assert cmd[:3] == ["/opt/cuda/bin/compute-sanitizer", "--tool", "memcheck"]
    i = cmd.index(sys.executable)
    assert cmd[i:] == [sys.executable, "-m", "cumm", "check", "--kernel-file", str(py), "--kernel", "cli_r"]
    assert seen["env"]["CUMM_UNDER_SANITIZER"] == "1"


def test_public_names():
    for name in ("register", "unregister", "kernel_source", "check", "bench", "Constraint", "CheckReport"):
        assert name in cumm.__all__


# ---------------------------------------------------------------------------------------------------
# On a GPU: a rung copied, one default changed, checked, raced, tuned; the package untouched
# ---------------------------------------------------------------------------------------------------


@pytest.mark.gpu
def test_user_kernel_checked_raced_and_tuned(tmp_path):
    before = package_digest()
    _, py = new("exp_db", "double_buffer", tmp_path)
    py.write_text(py.read_text().replace("BK=8, WN=64", "BK=16, WN=64", 1))
    load(py)
    assert cumm.kernel_spec("exp_db").defaults["BK"] == 16

    report = cumm.check("exp_db")
    assert report.ok, str(report)
    assert {r.case for r in report.rows} >= {"1x1x1", "primes", "K = 1", "unaligned views", "2048 cube"}

    rows = cumm.bench(kernels=["double_buffer", "exp_db"], sizes=[256, 512])
    assert [(r["kernel"], r["M"]) for r in rows] == [
        (k, s) for s in (256, 512) for k in ("cublas", "double_buffer", "exp_db")
    ]
    assert all(r["status"] == "ok" and r["tflops"] > 0 for r in rows), rows

    res = cumm.tune("exp_db", 512, 512, 512, max_configs=2, budget_s=40, save=False, progress=False)
    assert res.kernel == "exp_db" and res.rel_err < 1e-5 and res.tflops > 0
    import cupy

    a = cupy.random.default_rng(0).standard_normal((512, 512), dtype=cupy.float32)
    c = cumm.matmul(a, a, kernel="exp_db", config=res.config)
    ref = a.astype(cupy.float64) @ a.astype(cupy.float64)
    assert float(cupy.linalg.norm(c - ref) / cupy.linalg.norm(ref)) < 1e-5
    assert package_digest() == before, "a file inside the package changed"


@pytest.mark.gpu
def test_replaced_template_runs_the_new_code(tmp_path):
    import cupy

    path = copy_naive(tmp_path)
    spec = cumm.register(naive_like("swap", path))
    a = cupy.random.default_rng(1).standard_normal((64, 64), dtype=cupy.float32)
    ref = a.astype(cupy.float64) @ a.astype(cupy.float64)
    c1 = cumm.matmul(a, a, kernel="swap")
    assert float(cupy.linalg.norm(c1 - ref) / cupy.linalg.norm(ref)) < 1e-5
    text = path.read_text()
    path.write_text(text.replace("cumm_epilogue(acc, c, alpha, beta)", "cumm_epilogue(2.0f * acc, c, alpha, beta)"))
    cumm.register(spec, replace=True)
    c2 = cumm.matmul(a, a, kernel="swap")
    assert float(cupy.linalg.norm(c2 - 2 * ref) / cupy.linalg.norm(ref)) < 1e-5
