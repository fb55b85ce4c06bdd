"""The HTML compile report (kiln.report / KILN_REPORT): what it contains, and that it loads in a real
headless browser (Chromium from the distribution, driven by Selenium) without console errors, with
every in-page link resolving."""
import html
import os
import re
import shutil
import subprocess
import sys
import textwrap

import pytest
import torch

import kiln
from kiln import _report


def _program(x, y):
    a = torch.relu(x) * 2 + y
    print("between graphs")  # a graph break
    b = a.softmax(-1)
    return b @ y.t() + 1


@pytest.fixture
def page(tmp_path, capsys):
    kiln.reset()
    f = kiln.compile(_program)
    x, y = torch.randn(8, 16), torch.randn(8, 16)
    f(x, y)
    f(x, y)
    f(torch.randn(4, 16), torch.randn(4, 16))  # a new size: a recompile
    path = kiln.report(str(tmp_path / "report.html"))
    with open(path) as fh:
        return path, fh.read()


def test_report_lists_graphs_breaks_recompiles_and_kernels(page):
    path, text = page
    s = kiln.stats()
    assert s["graphs"] >= 3 and s["graph_breaks"] >= 1 and s["recompiles"] >= 1
    for i in range(s["graphs"]):
        assert f"id='graph-{i}'" in text
    assert "print() is a side effect" in text                     # the break's reason
    assert "size mismatch at index 0: expected 8, actual 4" in text  # the recompile's guard, old and new value
    assert "check_tensor(L[&#x27;x&#x27;]" in text                  # guards, escaped
    assert re.search(r"<td><code>kernel0</code></td><td>%\d+ relu, %\d+ mul.Tensor, %\d+ add.Tensor</td>", text), "fused ops of a kernel"
    assert "<svg" in text and "class=\"cluster\"" in text        # the graph picture with a fusion cluster
    assert "class=\"timeline\"" in text and "class=\"stage\"" in text
    # Breaks link to the user's source line, which the page shows.
    line = _program.__code__.co_firstlineno + 2
    anchors = re.findall(r'href="#(src-\d+-%d)"' % line, text)
    assert anchors and f'id="{anchors[0]}"' in text
    assert html.escape('print("between graphs")') in text
    assert "http://" not in text.replace("http://www.w3.org/2000/svg", "") and "https://" not in text  # self-contained


def test_graph_picture_clusters_fused_ops():
    graph = textwrap.dedent("""\
        %0 = input 0 : f32[4, 8]{8, 1}
        %1 = aten::relu(%0) : f32[4, 8]{8, 1}
        %2 = aten::exp(%1) : f32[4, 8]{8, 1}
        %3 = aten::mm(%2, %0) : f32[4, 4]{4, 1}
        %4, %5 = aten::max.dim(%3, 1) : f32[4]{1}
        return %3, %4""")
    program = "kernel kernel0 outer[4]  # %1=aten::relu, %2=aten::exp\n"
    nodes, owner, outputs = _report.parse_aten_graph(graph)
    assert nodes[3] == ("aten::mm", [2, 0], "f32[4, 4]{4, 1}") and nodes[4][0] == "aten::max.dim" and 5 not in nodes
    assert owner[5] == owner[4] == 4 and outputs == [3, 4]
    assert _report.parse_kernels(program) == [("kernel0", [1, 2])]
    svg = _report.graph_svg(graph, program)
    assert svg.count('class="cluster"') == 1 and svg.count('class="op"') == 5  # max.dim's two outputs: one op
    assert "kernel0: 2 fused ops" in svg


def test_report_env_written_at_exit(tmp_path):
    path = tmp_path / "atexit.html"
    code = "import torch, kiln\nf = kiln.compile(lambda x: (x * 2).relu())\nf(torch.randn(5))\nf(torch.randn(5))\n"
    env = dict(os.environ, KILN_REPORT=str(path))
    subprocess.run([sys.executable, "-c", code], env=env, check=True, cwd=os.path.dirname(os.path.dirname(kiln.__file__)))
    text = path.read_text()
    assert "Graph 0" in text and "<svg" in text


def _chromium_driver():
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (scripts/setup.sh installs it)")
    binary = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    driver_path = shutil.which("chromedriver")
    if not binary or not driver_path:
        pytest.skip("Chromium and its driver are not installed (scripts/setup.sh apt-gets chromium and chromium-driver)")
    from selenium.webdriver.chrome.service import Service
    opts = webdriver.ChromeOptions()
    opts.binary_location = binary
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1400,1000"):
        opts.add_argument(a)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    # The browser is not kiln: under scripts/sanitize.sh it must not inherit the sanitizer runtimes.
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    return webdriver.Chrome(service=Service(driver_path, env=env), options=opts)


def test_report_loads_in_headless_chromium(page, tmp_path):
    path, _ = page
    driver = _chromium_driver()
    try:
        driver.get("file://" + path)
        assert driver.title == "kiln compile report"
        errors = [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]
        assert not errors, errors
        # Every in-page link has its target; no link leaves the page.
        unresolved = driver.execute_script(_report.UNRESOLVED_LINKS_JS)
        assert unresolved == []
        n_links = driver.execute_script("return document.querySelectorAll('a.src').length")
        assert n_links >= 2
        # The SVGs rendered: the timeline and graph pictures have a real size on the page.
        sizes = driver.execute_script("return [...document.querySelectorAll('svg')].map(s => s.getBoundingClientRect().width)")
        assert len(sizes) >= 2 and all(w > 50 for w in sizes)
        # Every label of the timeline lies inside its picture (the last time tick was cut off).
        outside = driver.execute_script("""
            const bad = [];
            for (const svg of document.querySelectorAll('svg.timeline')) {
              const w = svg.width.baseVal.value;
              for (const t of svg.querySelectorAll('text')) {
                const b = t.getBBox();
                if (b.x < 0 || b.x + b.width > w) bad.push(t.textContent);
              }
            }
            return bad;""")
        assert outside == []
        # Following a break's source link scrolls to and highlights the line.
        first = driver.execute_script("const a = document.querySelector('a.src'); a.click(); return a.getAttribute('href')")
        assert driver.execute_script("return location.hash") == first
        shot = os.environ.get("KILN_REPORT_SCREENSHOT")
        driver.execute_script("window.scrollTo(0, 0)")
        driver.save_screenshot(shot or str(tmp_path / "report.png"))
    finally:
        driver.quit()
