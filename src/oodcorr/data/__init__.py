"""Testsets: registry (plain data), loaders (hub / local / synthetic) and the prepare stage.

Other stages use `load_prepared(out_dir, name)`, `read_manifest(out_dir)` and `prepared_dir(params)`.
"""

from oodcorr.data.prepare import load_prepared, prepare, prepared_dir, read_manifest

__all__ = ["load_prepared", "prepare", "prepared_dir", "read_manifest"]
