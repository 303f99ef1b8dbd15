"""`dvc plots show` renders offline: the repository's .dvc/config points DVC at .dvc/plots/offline.html, which
inlines vega / vega-lite / vega-embed (DVC's default page loads them from a CDN and is blank offline)."""

import configparser
import re
import shutil

from study_helpers import REPO, sh


def test_plots_page_needs_no_network(tmp_path):
    cfg = configparser.ConfigParser()
    cfg.read(REPO / ".dvc" / "config")
    template = cfg["plots"]["html_template"]
    root = tmp_path / "p"
    root.mkdir()
    sh(["git", "init", "-q"], root)
    sh(["dvc", "init", "-q"], root)
    shutil.copytree(REPO / ".dvc" / "plots", root / ".dvc" / "plots")
    sh(["dvc", "config", "plots.html_template", template], root)
    (root / "acc.csv").write_text("step,testset,accuracy\n0,a,0.5\n2,a,0.6\n0,b,0.4\n2,b,0.7\n")
    (root / "dvc.yaml").write_text(
        "plots:\n  - acc.csv:\n      x: step\n      y: accuracy\n      template: by_testset\n"
    )
    sh(["dvc", "plots", "show"], root)
    page = (root / "dvc_plots" / "index.html").read_text()
    assert not re.search(r"<script[^>]+src=\"https?://", page)  # nothing fetched from the network
    assert "vega-embed 6.29.0" in page and "vegaEmbed(" in page and '"testset"' in page
    assert "/dvc_plots/" in (REPO / ".gitignore").read_text()
    assert (REPO / ".dvc" / "plots" / "offline.html").stat().st_size < 1_500_000
