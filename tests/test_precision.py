"""What `dtype: auto` means per CPU (native bf16 or not), the warning for emulated bf16, and the
evaluation settings on CPU: adapters merged, dtype in the cache key."""

from __future__ import annotations

import pytest
import yaml

from oodcorr.core.errors import UserError
from oodcorr.modeling import precision


@pytest.fixture
def cpu_only(monkeypatch):
    import torch

    detect = precision.native_bf16_cpu  # cached per process: cleared around each test
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    detect.cache_clear()
    precision._warned.clear()
    yield
    detect.cache_clear()
    precision._warned.clear()


def _no_torch_probes(monkeypatch):
    import torch

    for fn in ("_is_amx_tile_supported", "_is_avx512_bf16_supported"):
        monkeypatch.delattr(torch.cpu, fn, raising=False)


@pytest.mark.parametrize(
    "flags,machine,expected",
    [
        ({"avx2", "avx512f", "avx512_bf16"}, "x86_64", "AVX512-BF16"),
        ({"avx512_bf16", "amx_tile", "amx_bf16"}, "x86_64", "AMX-BF16"),
        ({"avx2", "avx512f", "avx512bw"}, "x86_64", None),  # AVX-512 without BF16: bf16 is emulated
        ({"fp", "asimd", "bf16", "sve"}, "aarch64", "Arm BF16"),
        ({"fp", "asimd"}, "aarch64", None),
    ],
)
def test_native_bf16_from_cpu_flags(monkeypatch, cpu_only, flags, machine, expected):
    _no_torch_probes(monkeypatch)
    monkeypatch.setattr(precision, "_cpuinfo_flags", lambda: flags)
    monkeypatch.setattr(precision.platform, "machine", lambda: machine)
    assert precision.native_bf16_cpu() == expected


def test_torch_probes_agree_with_the_kernel_flags(cpu_only):
    """On this machine, whatever it is: torch's cpuinfo answer and /proc/cpuinfo's flags say the same."""
    import platform

    flags = precision._cpuinfo_flags()
    if platform.machine() != "x86_64" or not flags:
        pytest.skip("x86 Linux only")
    want = "AMX-BF16" if "amx_bf16" in flags else "AVX512-BF16" if "avx512_bf16" in flags else None
    assert precision.native_bf16_cpu() == want


def test_auto_dtype_trains_in_float32_on_every_cpu(monkeypatch, cpu_only):
    import torch

    monkeypatch.setattr(precision, "native_bf16_cpu", lambda: "AMX-BF16")
    # training: auto is float32 on every CPU (bf16 training's ID gain on these recipes is not measured)
    assert precision.resolve_dtype("auto") == torch.float32
    assert precision.resolve_dtype("bfloat16") == torch.bfloat16  # an explicit choice, no warning here
    monkeypatch.setattr(precision, "native_bf16_cpu", lambda: None)
    assert precision.resolve_dtype("auto") == torch.float32


def test_auto_dtype_scores_in_bf16_where_the_cpu_has_it(monkeypatch, cpu_only):
    import torch

    for native in ("AMX-BF16", "AVX512-BF16", "Arm BF16"):
        monkeypatch.setattr(precision, "native_bf16_cpu", lambda native=native: native)
        assert precision.resolve_scoring_dtype("auto") == torch.bfloat16
        assert precision.resolve_scoring_dtype("float32") == torch.float32  # wherever the user says so
    monkeypatch.setattr(precision, "native_bf16_cpu", lambda: None)  # emulated: float32
    assert precision.resolve_scoring_dtype("auto") == torch.float32
    with pytest.raises(UserError, match="expected auto, float32, bfloat16 or float16"):
        precision.resolve_scoring_dtype("bf16")


def test_the_quickstart_pins_float32_scoring():
    """Its committed outputs must check equal on any CPU, so it does not leave the scoring dtype to the CPU."""
    from oodcorr.study import load_preset

    assert load_preset("quickstart")["evaluate"]["dtype"] == "float32"  # params.yaml is this preset (test_study)


def test_bf16_on_an_emulating_cpu_warns_once_with_the_slowdown(monkeypatch, cpu_only, capsys):
    import torch

    monkeypatch.setattr(precision, "native_bf16_cpu", lambda: None)
    monkeypatch.setattr(precision, "emulated_bf16_slowdown", lambda: 6.2)
    assert precision.resolve_dtype("bfloat16") == torch.bfloat16  # not an error
    precision.resolve_dtype("bfloat16")
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("warning: dtype bfloat16") and "6x slower" in err[0]
    monkeypatch.setattr(precision, "native_bf16_cpu", lambda: "AMX-BF16")
    precision._warned.clear()
    precision.resolve_dtype("bfloat16")
    assert capsys.readouterr().err == ""


def test_emulated_slowdown_is_a_measured_ratio():
    assert precision.emulated_bf16_slowdown(size=64, reps=1) > 0


def test_bad_dtype_is_one_line(cpu_only):
    from oodcorr.core.errors import UserError

    with pytest.raises(UserError, match="dtype: expected auto, float32, bfloat16 or float16, got 'bf16'"):
        precision.resolve_dtype("bf16")


def _settings(tmp_path, **evaluate):
    from oodcorr.evaluate.cache import resolve_settings
    from oodcorr.evaluate.settings import EvaluateSettings
    from oodcorr.settings.config import load_params
    from oodcorr.settings.run_settings import RunSettings

    declared = {"idt": {"path": "raw/idt.jsonl", "premise": "premise", "hypothesis": "hypothesis", "label": "label"}}
    params = {
        "study": {"name": "t"},
        "data": {"out": "data/prepared", "testsets": declared},
        "train": {"quantization": "none", "max_length": 48},
        "runs": {"r": {"model": "tiny-opt", "train_set": "idt", "id_testset": "idt", "shots": 8}},
        "evaluate": {"testsets": ["idt"], **evaluate},
    }
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    params = load_params(tmp_path / "params.yaml")
    return resolve_settings(EvaluateSettings.from_params(params), RunSettings.from_params(params, "r"))


def test_cpu_scoring_merges_adapters_and_keys_carry_the_dtype(tmp_path, monkeypatch, cpu_only, capsys):
    from oodcorr.evaluate.cache import cache_key

    monkeypatch.setattr(precision, "native_bf16_cpu", lambda: "AVX512-BF16")
    auto = _settings(tmp_path)
    capsys.readouterr()  # a first use materialises the tiny model (its progress bars are not warnings)
    f32 = _settings(tmp_path, dtype="float32")
    assert auto["dtype"] == "bfloat16" and f32["dtype"] == "float32"  # auto scores in bf16 on a native-bf16 CPU
    assert auto["lora_merge"] is True and f32["lora_merge"] is True
    assert cache_key("c", "t", auto) != cache_key("c", "t", f32)
    assert cache_key("c", "t", auto) == cache_key("c", "t", _settings(tmp_path, dtype="bfloat16"))
    monkeypatch.setattr(precision, "native_bf16_cpu", lambda: None)
    assert _settings(tmp_path)["dtype"] == "float32"
    assert capsys.readouterr().err == ""
