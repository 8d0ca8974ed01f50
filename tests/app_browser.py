"""elmo-app in a real browser: the system's headless Chromium (Debian's `chromium` and `chromium-driver`, which
`make` installs with apt-get) driven by Selenium. Helpers for tests/test_app.py, and the script that writes the
screenshots of docs/app.md:

    python tests/app_browser.py [--model MODEL] [--out docs]

which starts `elmo-app` on a free local port, runs each view on its example input and saves docs/app_similarity.png,
docs/app_neighbours.png and docs/app_contextuality.png. The Chinese examples need a CJK font for Chromium
(`apt-get install fonts-wqy-microhei`); the screenshots show the English ones.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
REPO = Path(__file__).resolve().parents[1]


def browser_missing() -> str | None:
    """Why the browser cannot be driven here (one line), or None."""
    missing = [str(path) for path in (CHROMIUM, CHROMEDRIVER) if not path.is_file()]
    if missing:
        return (f"{' and '.join(missing)} not installed (make installs Debian's chromium and chromium-driver with "
                "apt-get where it can)")
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "the selenium package is not installed (pip install -e '.[dev]')"
    return None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def running_app(model: str | None, env: dict | None = None, timeout: float = 180):
    """The real `elmo-app` command serving `model` (None: its default) on a free 127.0.0.1 port: yields (url,
    process); stopped with SIGTERM at the end (its exit status is then `process.returncode`)."""
    port = free_port()
    command = shutil.which("elmo-app", path=str(Path(sys.executable).parent)) or "elmo-app"
    model_args = [] if model is None else ["--model", str(model)]
    process = subprocess.Popen([command, *model_args, "--port", str(port)], cwd=REPO,
                               env=env or os.environ.copy(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, start_new_session=True)
    url = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.monotonic() + timeout
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"elmo-app exited with {process.returncode}: {process.stderr.read()[-2000:]}")
            with contextlib.suppress(OSError):
                with urllib.request.urlopen(url, timeout=5) as response:
                    if response.status == 200:
                        break
            if time.monotonic() > deadline:
                raise RuntimeError(f"elmo-app did not answer on {url} within {timeout:.0f} s")
            time.sleep(0.5)
        yield url, process
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


@contextlib.contextmanager
def chromium(width: int = 1280, height: int = 1400):
    """A headless Chromium driven through Debian's chromedriver (Selenium never downloads a browser here)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                     f"--window-size={width},{height}"):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def element(driver, css: str, timeout: float = 60):
    """The first element matching `css`, waiting for the page to render it."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout).until(lambda d: d.find_element(By.CSS_SELECTOR, css))


def fill(driver, css: str, text: str) -> None:
    """Replace the text of the textbox `css` as a person does: select all, delete, type (the page sees every
    keystroke; Selenium's `clear()` empties the box without telling the page)."""
    from selenium.webdriver.common.keys import Keys

    box = element(driver, f"{css} textarea, {css} input")
    box.send_keys(Keys.CONTROL, "a")
    box.send_keys(Keys.BACKSPACE)
    if text:
        box.send_keys(text)


def run_view(driver, view: str, cells: str, timeout: float = 120) -> tuple[str, list]:
    """Click the button of `view` ("sim", "nn", "ctx") and wait for its answer: the page idle again, with its
    message or its result changed. Returns (the message's text, the elements matching `cells` in the result)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    result = f"#{view}-table" if view != "nn" else "#nn-result"
    message = f"#{view}-message"

    def state(d):
        shown = d.find_element(By.CSS_SELECTOR, f"{result} .html-container").get_attribute("innerHTML")
        return shown, d.find_element(By.CSS_SELECTOR, message).text

    def idle(d):  # Gradio's status trackers are hidden when no request of the page is pending
        return all("hide" in (t.get_attribute("class") or "").split()
                   for t in d.find_elements(By.CSS_SELECTOR, f"{result} [data-testid='status-tracker'], "
                                            f"{message} [data-testid='status-tracker']"))

    button = element(driver, f"#{view}-run")  # waits for the page (or the tab) to be drawn
    element(driver, f"{result} .html-container")
    before = state(driver)
    button.click()
    WebDriverWait(driver, timeout, poll_frequency=0.2).until(lambda d: idle(d) and state(d) != before)
    return state(driver)[1], driver.find_elements(By.CSS_SELECTOR, f"{result} {cells}")


def open_tab(driver, name: str) -> None:
    from selenium.webdriver.common.by import By

    for tab in driver.find_elements(By.CSS_SELECTOR, "button[role='tab']"):
        if tab.text.strip() == name:
            tab.click()
            return
    raise LookupError(f"no tab {name!r}")


def screenshot(driver, path: Path, css: str = "gradio-app", max_height: int = 2400) -> None:
    """The element `css` whole (at most `max_height` pixels tall): the window is grown to hold it first, since
    Chromium draws only what the window holds."""
    from selenium.webdriver.common.by import By

    driver.set_window_size(1280, 900)  # a shorter view than the last one: let the page shrink first
    time.sleep(0.5)
    for _ in range(3):  # images finish loading and the layout grows: measure again
        height = driver.execute_script("return document.documentElement.scrollHeight")
        driver.set_window_size(1280, min(int(height) + 200, max_height))
        time.sleep(1.0)
    driver.find_element(By.CSS_SELECTOR, css).screenshot(str(path))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Screenshots of each view of elmo-app for docs/app.md.")
    parser.add_argument("--model", default=None,
                        help="the model shown (default: elmo-app's, the demo's model where make demo wrote it)")
    parser.add_argument("--out", default=str(REPO / "docs"), help="where app_*.png go (default docs/)")
    args = parser.parse_args(argv)
    reason = browser_missing()
    if reason:
        print(f"cannot take screenshots: {reason}", file=sys.stderr)
        return 2
    out = Path(args.out)
    with running_app(args.model) as (url, _), chromium() as driver:
        driver.get(url)
        run_view(driver, "sim", "td[data-layer]")
        screenshot(driver, out / "app_similarity.png")
        open_tab(driver, "Nearest neighbours in context")
        run_view(driver, "nn", "td[data-rank]")
        screenshot(driver, out / "app_neighbours.png")
        open_tab(driver, "How contextual is each layer?")
        run_view(driver, "ctx", "td[data-layer]")
        screenshot(driver, out / "app_contextuality.png")
    print(f"wrote {', '.join(str(out / f'app_{v}.png') for v in ('similarity', 'neighbours', 'contextuality'))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
