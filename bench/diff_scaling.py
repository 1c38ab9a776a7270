"""`gradtrace diff` of two saved traces of N-op chains, against just parsing their JSON.

Each side is `gradtrace show chain.py --json` of a chain of N ops (`y = y * 1.0001`, then
`y.backward()`). Three pairs: a trace and its copy; the copy with every node id renumbered
(reversed); and a chain with one op in the middle made a division. Each diff is a new
process (torch is not imported: both sides are JSON); the baseline is a process that only
parses both files with `json.load`, measured in the same run.

    .venv/bin/python bench/diff_scaling.py [--chains 10000,100000]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from measure import measured

from gradtrace.model.compact import expanded

CHAIN = """import torch

x = torch.tensor(1.0, requires_grad=True)
y = x
for i in range({n}):
    y = y / 0.9999 if i == {changed} else y * 1.0001
y.backward()
"""
GOAL = "goal: the diff of two 100,000-node traces in ≤ 5 s"
PARSE = "import json, sys\nfor path in sys.argv[1:]:\n    json.load(open(path))\n"


def saved_trace(folder: Path, name: str, n: int, changed: int) -> Path:
    script = folder / f"{name}.py"
    script.write_text(CHAIN.format(n=n, changed=changed))
    out = folder / f"{name}.json"
    with out.open("w") as f:
        subprocess.run([sys.executable, "-m", "gradtrace", "show", str(script), "--json"],
                       stdout=f, check=True)
    return out


def renumbered(path: Path, folder: Path) -> Path:
    """The same trace with every node id changed: reversed order (written as /2 data)."""
    data = expanded(json.loads(path.read_text()))
    ids = [n["id"] for n in data["nodes"]]
    new = dict(zip(ids, reversed(ids), strict=True))
    data["nodes"] = [{**n, "id": new[n["id"]]} for n in reversed(data["nodes"])]
    data["edges"] = [{**e, "src": new[e["src"]], "dst": new[e["dst"]]} for e in data["edges"]]
    data["outputs"] = [new[o] for o in data["outputs"]]
    for t in data["tensors"]:
        t["node"] = new.get(t["node"])
    for p in data["passes"]:
        p["roots"] = [new[r] for r in p["roots"]]
        p["flow"] = {new[k]: {"order": i, **f} for i, (k, f) in enumerate(p["flow"].items())}
    out = folder / f"{path.stem}_renumbered.json"
    out.write_text(json.dumps(data))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chains", default="10000,100000")
    args = parser.parse_args()
    print(GOAL)
    print(f"{'pair':>28} {'nodes':>9} | {'parse s':>7} | {'diff s':>7} {'ratio':>6} "
          f"{'MiB':>6} {'rc':>2}")
    gradtrace = [sys.executable, "-m", "gradtrace", "diff"]
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        for n in map(int, args.chains.split(",")):
            a = saved_trace(folder, f"a{n}", n, -1)
            copy = folder / f"copy{n}.json"
            copy.write_bytes(a.read_bytes())
            pairs = [("a copy", copy), ("renumbered", renumbered(a, folder)),
                     ("one op made a division", saved_trace(folder, f"b{n}", n, n // 2))]
            for label, b in pairs:
                _, parse_s, _ = measured([sys.executable, "-c", PARSE, str(a), str(b)])
                code, diff_s, diff_mib = measured([*gradtrace, str(a), str(b)])
                print(f"{label:>28} {n + 1:>9,} | {parse_s:>7.2f} | {diff_s:>7.2f} "
                      f"{diff_s / parse_s:>5.2f}× {diff_mib:>6.0f} {code:>2}")
                sys.stdout.flush()


if __name__ == "__main__":
    main()
