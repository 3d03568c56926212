"""Opens a graph + node-data pair (``workbench etvk explorer``) in Google's Model Explorer, in headless Chromium,
and checks that the node data loaded: the provider's name and its aggregated sum appear in the side panel.

    python tools/model_explorer_check.py DIR/delegate-0.graph.json DIR/delegate-0.node_data.json --png shot.png

Needs ``ai-edge-model-explorer`` and playwright with Debian's /usr/bin/chromium (as tests/browser use).
"""
import argparse
import json
import re
import subprocess
import sys
import time

from playwright.sync_api import sync_playwright


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("graph")
    ap.add_argument("node_data")
    ap.add_argument("--png", required=True)
    ap.add_argument("--port", type=int, default=8127)
    args = ap.parse_args()
    name = next(iter(json.load(open(args.node_data)).values()))["name"]
    server = subprocess.Popen([sys.executable, "-m", "model_explorer", args.graph, f"--node_data_paths={args.node_data}",
                               "--no_open_in_browser", f"--port={args.port}"], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
    try:
        url = None
        for line in server.stdout:
            m = re.search(rf"http://localhost:{args.port}/\S+", line)
            if m:
                url = m.group(0)
                break
        if url is None:
            print("model-explorer printed no URL", file=sys.stderr)
            return 1
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 1600, "height": 1000})
            page.goto(url)
            deadline = time.time() + 90
            while time.time() < deadline and name not in page.inner_text("body"):
                time.sleep(2)
            time.sleep(3)
            page.screenshot(path=args.png)
            text = page.inner_text("body")
            browser.close()
        ok = name in text and "Sum" in text
        print(f"{'loaded' if ok else 'NOT loaded'}: {name!r} in the page; screenshot {args.png}")
        return 0 if ok else 1
    finally:
        server.terminate()


if __name__ == "__main__":
    sys.exit(main())
