"""The compile report of a bench case, and its screenshot in headless Chromium.

    python tools/report_screenshot.py [--case hf_bert] [--out docs/report_hf_bert.png] [--html report.html]

Compiles the case (../shared/bench/suite.py) with kiln, calls it twice and then once at another
sequence length (a recompile, with its reason in the report), writes kiln.report() and loads it
in headless Chromium (Selenium, as tests/python/test_report.py does); the page must load without
console errors and every in-page link must resolve. Saves the top of the page (summary,
timeline, the first graph) as a PNG."""
import argparse
import os
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
BENCH = os.path.join(os.path.dirname(os.path.dirname(HERE)), "shared", "bench")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--case", default="hf_bert")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(HERE), "docs", "report_hf_bert.png"))
    ap.add_argument("--html", default=None)
    ap.add_argument("--height", type=int, default=1500)
    a = ap.parse_args()

    import torch
    import kiln
    from kiln import _report
    sys.path.insert(0, BENCH)
    from suite import CASES
    torch.manual_seed(0)
    model, args, _ = CASES[a.case]("cpu")
    compiled = kiln.compile(model)
    with torch.no_grad():
        compiled(*args)
        compiled(*args)
        if all(isinstance(t, torch.Tensor) and t.dim() == 2 for t in args):  # (ids, mask): another length
            compiled(*[t[:, : t.shape[1] // 2].contiguous() for t in args])
    html = a.html or os.path.join(tempfile.mkdtemp(prefix="kiln_report_"), "report.html")
    kiln.report(html)

    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    opts = webdriver.ChromeOptions()
    opts.binary_location = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", f"--window-size=1300,{a.height}"):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=opts)
    try:
        driver.get("file://" + os.path.abspath(html))
        errors = [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]
        unresolved = driver.execute_script(_report.UNRESOLVED_LINKS_JS)
        driver.execute_script("window.scrollTo(0, 0)")
        driver.save_screenshot(a.out)
    finally:
        driver.quit()
    print(f"{html}: {os.path.getsize(html) / 1024:.0f} KiB, console errors {len(errors)}, unresolved links {len(unresolved)}; "
          f"screenshot {a.out}")
    if errors or unresolved:
        raise SystemExit(f"console errors: {errors}\nunresolved links: {unresolved}")


if __name__ == "__main__":
    main()
