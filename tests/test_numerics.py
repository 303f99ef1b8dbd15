"""core/numerics.py: MKL's strict reproducible mode is set by `import oodcorr` before torch loads MKL, only where
the CPU has AVX2, and never over a value the user set. (That it makes outputs thread-independent is measured end
to end by tests/test_faults_dvc.py's two-thread test.)"""

import subprocess
import sys

from oodcorr.core import numerics


def test_the_branch_follows_the_cpu_flags():
    assert numerics.branch({"sse2", "avx", "avx2", "fma"}) == "AVX2,STRICT"
    assert numerics.branch({"sse2", "avx", "avx2", "avx512f", "avx512_bf16"}) == "AVX2,STRICT"
    assert numerics.branch({"sse2", "sse4_2", "avx"}) is None
    assert numerics.branch(set()) is None


def test_cpu_flags_reads_the_flags_line(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nmodel name\t: X\nflags\t\t: fpu sse2 avx2\n\nprocessor\t: 1\n")
    assert numerics.cpu_flags(str(info)) == {"fpu", "sse2", "avx2"}
    assert numerics.cpu_flags(str(tmp_path / "absent")) == set()


def _env_after_import(env: dict) -> str:
    code = "import os, oodcorr, torch; torch.ones(2, 2) @ torch.ones(2, 2); print(repr(os.environ.get('MKL_CBWR')))"
    res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return res.stdout.strip()


def test_import_oodcorr_sets_it_and_a_users_value_wins():
    import os

    base = {k: v for k, v in os.environ.items() if k != "MKL_CBWR"}
    want = repr(numerics.branch())
    assert _env_after_import(base) == want
    assert _env_after_import(dict(base, MKL_CBWR="COMPATIBLE")) == "'COMPATIBLE'"
    assert _env_after_import(dict(base, MKL_CBWR="")) == "''"  # set but empty: MKL's default, left as it is
