"""tools/gpu_check.py and tools/bench_scale.py --reference: the GPU check the lead runs, on a CPU.

The check itself needs a CUDA GPU; ``DRY=1`` runs the same code on a CPU with tiny sizes. These
tests run its cheap parts: what comes back from ``$OUT`` (at most 8 files, none in a folder) and
that the reference tables it produces have the fields the chapter reads.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _run(arguments, env_updates, timeout=600):
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), **env_updates)
    return subprocess.run([sys.executable, *arguments], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout)


def test_gpu_check_leaves_a_summary_and_at_most_eight_flat_files(tmp_path):
    out = tmp_path / "out"
    done = _run(["tools/gpu_check.py"], {"DRY": "1", "OUT": str(out), "STEPS": "env"})
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    files = sorted(path.relative_to(out) for path in out.rglob("*"))
    assert {"summary.md", "results.json", "log.txt"} <= {str(f) for f in files}
    assert len(files) <= 8 and all(len(f.parts) == 1 for f in files), files
    summary = (out / "summary.md").read_text()
    assert done.stdout.rstrip().endswith(summary.rstrip())  # the summary is printed last
    results = json.loads((out / "results.json").read_text())
    assert results["steps"]["env"]["status"] == "ok"
    assert results["steps"]["notebooks"]["status"].startswith("not asked for")


def test_gpu_check_without_a_gpu_and_without_dry_stops_with_a_reason(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    done = _run(["tools/gpu_check.py"], {"DRY": "0", "OUT": str(tmp_path), "STEPS": "env"})
    assert done.returncode == 1 and "DRY=1" in done.stdout


def test_gpu_check_documents_how_the_lead_runs_it():
    text = (ROOT / "tools" / "gpu_check.py").read_text()
    doc = ast.get_docstring(ast.parse(text))
    for needed in ("--download-wheels", "pip install -q --no-index --no-deps --target /tmp/site",
                   "TIKTOKEN_CACHE_DIR", "DRY=1", "--gpu-check", "GPU_CHECK_DEADLINE", "BUDGET_S"):
        assert needed in doc, needed


@pytest.mark.slow
def test_reference_run_writes_the_tables_the_chapter_reads(tmp_path):
    done = _run(["tools/bench_scale.py", "--reference", "--quick", "--repeats", "2", "--device", "cpu",
                 "--out", str(tmp_path)], {})
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    text = (tmp_path / "scale-reference.md").read_text()
    literal = ast.literal_eval(text.split("SCALE_CPU = ", 1)[1].strip())
    assert set(literal) == {"command", "date", "machine", "load", "tables"}
    tables = literal["tables"]
    assert {"causal_flag", "causal_blocks", "fused_overhead", "roofline", "kv_cache",
            "decode_overhead", "curve", "sweep"} <= set(tables)
    for table in tables.values():
        assert {"title", "sizes", "header", "rows"} <= set(table)
        assert all(len(row) == len(table["header"]) for row in table["rows"])
    # the keys the chapter looks rows up by
    assert [row[0] for row in tables["causal_flag"]["rows"]] == [
        "is_causal=True", "attn_mask tensor", "no mask (bidirectional)"]
    assert tables["fused_overhead"]["rows"][0][0] == "forward"
    assert set(tables["decode_overhead"]["sizes"]) == {"width", "num_heads", "num_layers", "tokens", "dtype"}
    assert set(tables["kv_cache"]["sizes"]) == {"width", "heads", "layers", "dtype"}
    assert json.loads((tmp_path / "scale-reference.json").read_text())["tables"].keys() == tables.keys()
