"""Screenshot the MLflow UI of a study (a real `mlflow server` on 127.0.0.1) or its report, in headless
Chromium, 1400 px wide, with a fresh, empty browser profile: what a new user sees on opening the link. On its
first visit to a server on 127.0.0.1 MLflow opens its Assistant panel over the right part of the page; like the
docs/mlflow.md tells the user, the script closes it (its × button) before the picture is taken.

    python scripts/mlflow_screenshot.py --project . --view table  --out docs/mlflow-runs-table.png
    python scripts/mlflow_screenshot.py --project . --view chart  --out docs/mlflow-chart-view.png
    python scripts/mlflow_screenshot.py --project . --view report --out docs/report-first-screen.png

`--project` is a study folder after `dvc repro` (its store: mlruns/mlflow.db). `table` and `chart` open the
links `oodcorr ui` prints (the study's runs table; its chart view, one chart per metric with every run);
`run` a training run's Model metrics tab, `figure` its logged figure, `analysis` the analysis run, `report`
results/report.html, `report-link` the link `oodcorr ui` prints for the newest report (MLflow's Artifacts
view; with --base, e.g. the server of `oodcorr ui --study sick`). Needs `chromium` (Debian: apt-get install
chromium). Prints the URL and the PNG path.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rest(base: str, path: str, body: dict | None = None) -> dict:
    req = urllib.request.Request(
        f"{base}/api/2.0/mlflow/{path}",
        data=json.dumps(body).encode() if body else None,
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())


def serve(project: Path, port: int) -> subprocess.Popen:
    """`mlflow server` on the project's sqlite store, 127.0.0.1 only, one worker."""
    db = project / "mlruns" / "mlflow.db"
    cmd = [
        sys.executable,
        "-m",
        "mlflow",
        "server",
        "--backend-store-uri",
        f"sqlite:///{db}",
        "--default-artifact-root",
        (project / "mlruns" / "artifacts").as_uri(),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--workers",
        "1",
    ]
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 300  # a loaded machine: MLflow's server import alone can take a minute
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"mlflow server exited: {proc.stderr.read()[-2000:]}")
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2)
            return proc
        except OSError:
            time.sleep(0.5)
    proc.kill()
    raise RuntimeError("mlflow server did not answer /health within 300 s")


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if shutil.which(name):
            return shutil.which(name)
    raise RuntimeError("chromium not found (apt-get install chromium)")


# Chart titles of MLflow's chart view and whether each is cut (its text wider than its box), read in the page.
TITLES_JS = """JSON.stringify(Array.from(document.querySelectorAll(
  '[data-testid="experiment-view-compare-runs-card"] h4')).map(
  t => ({text: t.textContent, full_px: t.scrollWidth, shown_px: t.clientWidth})))"""
CLOSE_ASSISTANT_JS = """(() => { const b = document.querySelector(
  '[data-assistant-ui] [data-component-id="mlflow.assistant.chat_panel.close"]');
  if (b) { b.click(); return 'closed'; } return document.querySelector('[data-assistant-ui]') ? 'open' : 'none'; })()"""


def screenshot(
    url: str,
    out: Path,
    size=(1400, 1000),
    wait_for: str = "",
    timeout: float = 600,
    settle: float = 240,
    probe: str | None = None,
    close_assistant: bool = True,
) -> tuple[str, str]:
    """Load `url` in headless Chromium, wait until the page's text contains `wait_for` (the React UI renders
    long after the load event), close the Assistant panel if MLflow opened it, wait up to `settle` s for the
    charts to draw, save a PNG; returns the page's text and the value of the JavaScript `probe` (evaluated
    just before the picture). Talks to Chromium over its DevTools protocol (aiohttp's websocket client)."""
    import asyncio
    import base64

    import aiohttp

    out.parent.mkdir(parents=True, exist_ok=True)
    port = free_port()

    async def drive() -> str:
        async with aiohttp.ClientSession() as http:
            for _ in range(120):
                try:
                    async with http.get(f"http://127.0.0.1:{port}/json/list") as r:
                        pages = [p for p in await r.json() if p["type"] == "page"]
                    if pages:
                        break
                except aiohttp.ClientError:
                    pass
                await asyncio.sleep(0.5)
            async with http.ws_connect(pages[0]["webSocketDebuggerUrl"], max_msg_size=0) as ws:
                ids = iter(range(1, 10**6))

                async def call(method, **params):
                    i = next(ids)
                    await ws.send_json({"id": i, "method": method, "params": params})
                    async for msg in ws:
                        data = msg.json()
                        if data.get("id") == i:
                            return data.get("result", {})

                await call(
                    "Emulation.setDeviceMetricsOverride",
                    width=size[0],
                    height=size[1],
                    deviceScaleFactor=1,
                    mobile=False,
                )
                await call("Emulation.setFocusEmulationEnabled", enabled=True)

                async def load(target: str) -> str:
                    await call("Page.navigate", url=target)
                    deadline, text = time.time() + timeout, ""
                    while time.time() < deadline:
                        await asyncio.sleep(1)
                        res = await call("Runtime.evaluate", expression="document.body ? document.body.innerText : ''")
                        text = res.get("result", {}).get("value", "")
                        if wait_for in text and "Loading" not in text[:200]:
                            break
                    return text

                text = await load(url)
                for _ in range(20 if close_assistant else 0):  # the panel opens a moment after the page renders
                    res = await call("Runtime.evaluate", expression=CLOSE_ASSISTANT_JS)
                    if res.get("result", {}).get("value") == "closed":
                        await asyncio.sleep(2)
                        break
                    await asyncio.sleep(1)
                deadline = time.time() + settle  # until the charts have drawn (plotly's svg), at most `settle` s
                while time.time() < deadline:
                    res = await call("Runtime.evaluate", expression="document.querySelectorAll('.main-svg').length")
                    if res.get("result", {}).get("value", 0) >= 2:
                        await asyncio.sleep(3)
                        break
                    await asyncio.sleep(1)
                probed = ""
                if probe:
                    res = await call("Runtime.evaluate", expression=probe)
                    probed = str(res.get("result", {}).get("value", ""))
                res = await call("Runtime.evaluate", expression="document.body ? document.body.innerText : ''")
                text = res.get("result", {}).get("value", "") or text
                shot = await call("Page.captureScreenshot", format="png")
                out.write_bytes(base64.b64decode(shot["data"]))
                return text, probed

    with tempfile.TemporaryDirectory() as profile:
        cmd = [
            chromium(),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            f"--user-data-dir={profile}",
            f"--window-size={size[0]},{size[1]}",
            f"--remote-debugging-port={port}",
            # software WebGL: the charts draw with plotly, which needs a WebGL context
            "--use-angle=swiftshader",
            "--enable-unsafe-swiftshader",
            "about:blank",
        ]
        browser = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            return asyncio.run(drive())
        finally:
            browser.terminate()
            browser.wait(timeout=30)


def find_runs(base: str, experiment: str | None) -> tuple[str, str, str | None]:
    """(experiment_id, first training run id, analysis run id) of the study's experiment."""
    exps = rest(base, "experiments/search", {"max_results": 100})["experiments"]
    exps = [e for e in exps if e["name"] != "Default" and (experiment is None or e["name"] == experiment)]
    if not exps:
        raise RuntimeError("no oodcorr experiment in the store (run `dvc repro` first)")
    exp_id = exps[0]["experiment_id"]
    runs = rest(base, "runs/search", {"experiment_ids": [exp_id], "max_results": 200})["runs"]
    tag = lambda r, k: {t["key"]: t["value"] for t in r["data"].get("tags", [])}.get(k)  # noqa: E731
    train = sorted((r for r in runs if tag(r, "oodcorr.kind") == "train"), key=lambda r: r["info"]["run_name"])
    analysis = [r for r in runs if tag(r, "oodcorr.kind") == "analysis"]
    if not train:
        raise RuntimeError("no training run in the experiment")
    return exp_id, train[0]["info"]["run_id"], analysis[0]["info"]["run_id"] if analysis else None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--project", default=".", type=Path)
    ap.add_argument("--out", default="docs/mlflow-run-view.png", type=Path)
    ap.add_argument(
        "--view", default="table", choices=["table", "chart", "report", "run", "figure", "analysis", "report-link"]
    )
    ap.add_argument("--experiment", default=None)
    ap.add_argument("--port", default=0, type=int)
    ap.add_argument("--base", default=None, help="an already running server (skip starting one)")
    ap.add_argument("--text", action="store_true", help="also print the page's visible text")
    ap.add_argument(
        "--keep-assistant",
        action="store_true",
        help="leave MLflow's Assistant panel open, as a first visit shows it (the README says to close it)",
    )
    ap.add_argument(
        "--titles",
        action="store_true",
        help="chart view: also print each chart's title and its full / shown width in px (JSON)",
    )
    args = ap.parse_args(argv)
    if args.view == "report":
        url = (args.project.resolve() / "results" / "report.html").as_uri()
        text, _ = screenshot(url, args.out, wait_for="In short", settle=2)
        print(text if args.text else url)
        print(args.out)
        return 0
    from oodcorr.tracking.analysis_run import report_link
    from oodcorr.tracking.ui_links import TABLE_VIEW, links

    port = args.port or free_port()
    base = args.base or f"http://127.0.0.1:{port}"
    proc = None if args.base else serve(args.project.resolve(), port)
    try:
        exp_id, run_id, analysis_id = find_runs(base, args.experiment)
        direct = links(base, exp_id, TABLE_VIEW)  # the runs table's view, as `oodcorr ui` stores it
        url = {
            "table": direct["runs table"],
            "chart": direct["chart view"],
            "run": f"{base}/#/experiments/{exp_id}/runs/{run_id}/model-metrics",
            "figure": f"{base}/#/experiments/{exp_id}/runs/{run_id}/artifacts/eval/accuracy_by_testset.png",
            "analysis": f"{base}/#/experiments/{exp_id}/runs/{analysis_id}",
            "report-link": f"{base}/{report_link(analysis_id, exp_id)}",
        }[args.view]
        text, titles = screenshot(
            url,
            args.out,
            wait_for={
                "run": "acc/",
                "figure": "accuracy_by_testset",
                "table": "Run Name",
                "chart": "acc/",
                "analysis": "report",
                "report-link": "report.html",
            }[args.view],
            settle=240 if args.view in ("run", "chart") else 15,
            probe=TITLES_JS if args.titles else None,
            close_assistant=not args.keep_assistant,
        )
        if args.text:
            print(text)
        if args.titles:
            print(titles)
        print(url)
        print(args.out)
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
