"""One night, one page, for real: the default registry's reproducers of a liger-kernel and a
megatron-core bug swept on the releases this interpreter has installed, in two shards as a
Slurm array would run them (`--shard 1/2`, `--shard 2/2`, one `--group`), merged with
`patchlane merge --group`, and the merged page loaded in headless Chromium: the rows of both
shards are on it, each naming its shard, and the verdicts are the shards' own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import unquote

import pytest

from patchlane.common.exit_codes import sweep_exit_code
from patchlane.runs.verdicts import Verdict, exit_bits

from ..evidence.test_report_browser import Dom, chromium, run_chromium
from .conftest import ROOT, requires_megatron

pytestmark = [pytest.mark.upstream, pytest.mark.slow, requires_megatron]

ONLY = ("liger_flce_weighted_none", "mcore_rerun_sentinel")


def patchlane(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "patchlane.cli.main", *args], env=env,
                          capture_output=True, text=True, check=False, timeout=900, cwd=ROOT)


def test_two_real_shards_merge_into_one_page_chromium_reads(tmp_path: Path) -> None:
    binary = chromium()
    if binary is None:
        pytest.skip("no Chromium found (chromium, chromium-browser or google-chrome on PATH, "
                    "or $PATCHLANE_CHROMIUM): scripts/_chromium.sh installs Debian's `chromium` "
                    "with apt-get; install it by hand where apt-get is not usable")
    pytest.importorskip("liger_kernel", reason="liger-kernel is not installed")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PATCHLANE_")}
    env.update(PYTHONWARNINGS="ignore", CI="1",
               PATCHLANE_GITHUB_API="http://127.0.0.1:9",  # the page sends no request anyway
               PATCHLANE_RANK_START=os.environ.get("PATCHLANE_RANK_START", "fresh"))
    root = tmp_path / "runs"
    only = [a for entry in ONLY for a in ("--only", entry)]
    shards: dict[str, dict[str, object]] = {}
    codes = []
    started = time.monotonic()
    for i in (1, 2):
        swept = patchlane("sweep", *only, "--lane", "cpu", "--shard", f"{i}/2", "--group",
                          "night-1", "--runs-root", str(root), "--jobs", "2", "--json",
                          "--quiet", env=env)
        assert swept.returncode in (0, 33, 34, 35, 36, 37, 38, 39), swept.stderr[-3000:]
        codes.append(swept.returncode)
        index = json.loads(swept.stdout)
        for row in index["rows"]:
            shards[f"{row['entry_id']}[{row['lane']}-ws{row['world_size']}]"] = {
                "shard": f"{i}/2", "verdict": row["verdict"], "run_id": index["run_id"]}
    swept_s = time.monotonic() - started
    # Both shards ran rows: the plan split 3 rows (liger ws1, the sentinel ws1 and ws2) 2 + 1.
    assert sorted(v["shard"] for v in shards.values()) == ["1/2", "1/2", "2/2"], shards

    merged = patchlane("merge", "--group", "night-1", "--runs-root", str(root), "--json",
                       env=env)
    index = json.loads(merged.stdout)
    rows = {f"{r['entry_id']}[{r['lane']}-ws{r['world_size']}]": r for r in index["rows"]}
    assert {k: (r["origin"]["shard"], r["verdict"], r["origin"]["run_id"])
            for k, r in rows.items()} == {
        k: (v["shard"], v["verdict"], v["run_id"]) for k, v in shards.items()}
    assert [s["state"] for s in index["shards"]] == ["delivered", "delivered"]
    assert not any(r["verdict"] == "error" for r in rows.values()), rows
    # The merge's status is the sweep's over every row: what the two shards said together.
    assert merged.returncode == sweep_exit_code(
        exit_bits(Verdict(r["verdict"]) for r in rows.values()))
    assert merged.returncode == (max(codes) and 32 | ((codes[0] | codes[1]) & 7))
    out = root / index["run_id"]

    dumped = run_chromium(binary, tmp_path / "profile", "--dump-dom",
                          (out / "report.html").as_uri())
    assert dumped.returncode == 0 and "</html>" in dumped.stdout, dumped.stderr[-3000:]
    dom = Dom()
    dom.feed(dumped.stdout)
    every = dom.visible("rows")
    for key, row in rows.items():
        assert row["entry_id"] in every
        assert f"row-{row['entry_id']}-cpu-ws{row['world_size']}" in dom.ids, key
    # Each shard's rows, named by their shard, and both shards listed with their runs.
    assert "1/2" in every and "2/2" in every
    listed = dom.visible("shards")  # the cells' text, one after the other
    for info in index["shards"]:
        assert f"{info['shard']}delivered{info['host']}{info['run_id']}" in listed, listed
        assert f"shard-{info['shard'].replace('/', 'of')}" in dom.ids
    # Every link the page has into a shard's receipts and logs resolves from the merged dir.
    local = [h for h in dom.hrefs if h.startswith("../")]
    assert local and all((out / unquote(h)).resolve().is_file() for h in local), local
    print(f"\nreal merged night: {len(rows)} rows from 2 shards, sweeps {swept_s:.1f} s, "
          f"verdicts {sorted(r['verdict'] for r in rows.values())}")
