"""The README's sweep spec is a valid spec that expands as the README says."""

from __future__ import annotations

import re
from pathlib import Path

from asicsim._src.sweep import expand, load_spec


def test_readme_spec_loads_and_expands(tmp_path):
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    blocks = re.findall(r"```toml\n(.*?)```", readme, re.S)
    assert blocks, "README has no ```toml spec block"
    path = tmp_path / "spec.toml"
    path.write_text(blocks[0])
    spec = load_spec(path)
    assert len(spec.designs) == 3 + 12  # "3 x 2 x 2 = 12 more designs"
    pts = expand(spec)
    kinds = [p.kind for p in pts]
    assert kinds.count("train") == 3 * 2 and kinds.count("infer") == 2 * 2
    assert kinds.count("cost") == (3 + 2) * 15 and kinds.count("kernels") == 15
