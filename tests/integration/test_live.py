"""The live view on a real fabric: a headless Chromium watches ZCube n=4 run a workload
(every switch and link drawn, links coloured while transfers run, a click fails a cable),
and /api/links read during a run gives links.csv's windows (root, OVS, Chromium)."""
import csv
import json
import shutil
import subprocess
import sys
import threading
import time
import urllib.request

import pytest

ZCUBE = [sys.executable, "-m", "testbed.cli"]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def _start(argv):
    """The command, and the live view's URL once it printed it."""
    proc = subprocess.Popen(ZCUBE + argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    lines = []
    deadline = time.time() + 60
    while time.time() < deadline:
        line = proc.stderr.readline()
        lines.append(line)
        if "live view: " in line:
            threading.Thread(target=lambda: lines.extend(proc.stderr), daemon=True).start()
            return proc, line.split("live view: ")[1].split()[0], lines
        if not line:
            break
    proc.kill()
    pytest.fail("no live view URL: " + "".join(lines)[-1500:])


def _json(url):
    with urllib.request.urlopen(url, timeout=5) as res:
        return json.loads(res.read())


@pytest.mark.skipif(CHROMIUM is None, reason="chromium missing (make setup installs it)")
def test_a_browser_watches_links_load_and_fails_a_cable_with_a_click(ovs, tmp_path):
    sync_playwright = pytest.importorskip("playwright.sync_api").sync_playwright
    proc, url, lines = _start(["up", "zcube", "--n", "4", "--kv", "--placement", "cross-rail",
                               "--rate", "8", "--count", "60", "--input-tokens", "8192",
                               "--no-report", "--web", "127.0.0.1:0", "--web-control",
                               "--calibration-s", "1",
                               "-o", str(tmp_path)])
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=[
                "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--no-first-run"])
            page = browser.new_page(viewport={"width": 1200, "height": 700})
            page.goto(url)
            page.wait_for_selector("#fabric .switch", timeout=60_000)
            assert page.locator("#fabric .switch").count() == 8
            assert page.locator("#fabric .link").count() == 2 * 48      # both directions
            assert page.locator("#fabric .host").count() == 16
            page.wait_for_function("document.getElementById('phase').textContent == "
                                   "'workload'", timeout=120_000)
            page.wait_for_function(               # a link coloured by the workload's load
                "document.body.dataset.source == 'run' && "
                "!document.getElementById('transfers').textContent.startsWith('0/') && "
                "[...document.querySelectorAll('#fabric .link')]"
                ".some(l => parseFloat(l.dataset.util || 0) > 0.05 && l.style.stroke)",
                timeout=30_000)
            name = None                    # a cable whose middle no other cable crosses
            for cable in page.locator('#fabric .cable[data-element^="a"]').all():
                try:
                    cable.locator(".hit").click(timeout=1500)
                except Exception:          # another cable's line is on top there
                    continue
                name = cable.get_attribute("data-element")
                break
            assert name is not None
            page.wait_for_function(f"document.querySelector('#fabric .cable[data-element="
                                   f"\"{name}\"]').classList.contains('down')", timeout=30_000)
            assert name in page.locator("#failures").inner_text()
            page.wait_for_function("document.getElementById('fct').textContent != '-'",
                                   timeout=30_000)           # the FCT so far, mid-workload
            page.screenshot(path=str(tmp_path / "live.png"), full_page=True)
            browser.close()
        assert proc.wait(timeout=240) == 0, "".join(lines)[-2000:]
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait()
    assert (tmp_path / "live.png").stat().st_size > 10_000
    summary = json.loads((tmp_path / "zcube" / "summary.json").read_text())
    assert summary["transfers_verified"] == summary["transfers_total"]
    assert summary["fidelity"]["web_cpu_s"] > 0     # a browser on the page costs under 5%
    assert 0 < summary["fidelity"]["web_cpu_share"] <= 0.05, summary["fidelity"]
    faults = [f for f in summary.get("faults") or []]
    assert faults == [] or all("element" in f for f in faults)


def test_api_links_read_during_a_run_are_links_csvs_windows(ovs, tmp_path):
    scen = tmp_path / "s.yaml"
    scen.write_text("name: live\nlink_mbps: 100\nrepetitions: 1\nverify_sample: 40\n"
                    "calibration_s: 1\n"
                    "fabrics: [{name: zc, builder: zcube, params: {n: 4}}]\n"
                    "deployment: {placements: [cross-rail]}\n"
                    "workload: {arrivals: poisson, rate: 8, count: 40, input_tokens: 8192}\n")
    proc, url, lines = _start(["run", str(scen), "--no-report", "--web", "0",
                               "-o", str(tmp_path / "out")])
    seen = {}
    try:
        while proc.poll() is None:
            try:
                status, links = _json(url + "api/status"), _json(url + "api/links")
            except OSError:                          # the server stops with the run
                break
            if status["phase"] == "workload" and links:
                seen[links[0]["t_s"]] = {(r["src"], r["dst"]): r for r in links}
            time.sleep(0.15)
        assert proc.wait(timeout=240) == 0, "".join(lines)[-2000:]
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait()
    with open(tmp_path / "out" / "zc" / "links.csv") as f:
        rows = list(csv.DictReader(f))
    windows = {}
    for r in rows:
        windows.setdefault(float(r["t_s"]), {})[(r["src"], r["dst"])] = float(r["util"])
    compared = 0
    for t_s, live in seen.items():
        if t_s not in windows:
            continue
        for hop, row in live.items():
            want = windows[t_s][hop]
            assert abs(row["util"] - want) <= max(0.02 if want < 0.2 else 0.1 * want, 1e-9)
            compared += 1
    assert len([t for t in seen if t in windows]) >= 3 and compared > 0
    assert any(max(r["util"] for r in live.values()) > 0.05 for live in seen.values())


def test_the_view_serves_beside_the_mininet_cli_and_shows_its_failures(ovs):
    proc = subprocess.Popen(ZCUBE + ["up", "zcube", "--n", "2", "--cli", "--web", "0"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        url = None
        for line in proc.stderr:
            if "live view: " in line:
                url = line.split("live view: ")[1].split()[0]
                break
        assert url, "no live view URL"
        threading.Thread(target=proc.stderr.read, daemon=True).start()
        deadline = time.time() + 60
        while time.time() < deadline:                    # up: the fabric shown, idle
            status = _json(url + "api/status")
            if status["fabric"] and status["phase"] == "idle":
                break
            time.sleep(0.2)
        fabric = _json(url + "api/fabric")
        assert len([n for n in fabric["nodes"] if n["kind"] == "host"]) == 4
        proc.stdin.write("fail a0-b1\n")
        proc.stdin.flush()
        while not _json(url + "api/status")["failures"]["links"] and time.time() < deadline:
            time.sleep(0.2)
        assert _json(url + "api/status")["failures"]["links"][0].startswith("a0:")
        proc.stdin.write("exit\n")
        proc.stdin.flush()
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait()
    with pytest.raises(OSError):                         # the view stopped with the fabric
        _json(url + "api/status")
