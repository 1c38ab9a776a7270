"""The JSON writer against the faster encoders issue 58 asks about (orjson, msgspec).

Records the N-op chain of bench/cli_scaling.py (`gradtrace show --json`, a new process),
reads the trace back, then times, in this process and best of --repeat:
- `json_chunks`: the whole trace as `show --json` and `-o` write it (the rows made from the
  Trace, then each item's text by json's C encoder);
- the same items' text alone, by json's C encoder as json_chunks makes it, by orjson and by
  msgspec (each only when installed), on the items made once beforehand, each text let go
  of as it is made (as json_chunks writes it: kept, orjson's buffers cost it 10×).
An encoder can save at most its "text alone" time less its rival's; the last line puts that
against the whole `show --json` of the same chain. orjson and msgspec also write other bytes
(no spaces after separators, `0.00001` for 1e-05): adopting either changes every trace's text.

    .venv/bin/python bench/json_writers.py [--nodes 100000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from cli_scaling import CHAIN
from measure import measured
from walk_vs_bare import best

from gradtrace.model.codec import Streamed, trace_from_dict, trace_sections
from gradtrace.model.records import Trace
from gradtrace.render.json import _encoder, json_chunks


def items(trace: Trace) -> list[Any]:
    """Every list item json_chunks writes one at a time (nodes, edges, gradients, each pass's
    flow entries as [node id, entry]), made once."""
    made: list[Any] = []
    for _, value in trace_sections(trace):
        if not isinstance(value, (list, Iterator)):
            continue
        for item in value:
            if type(item) is Streamed:
                for part in item.values():
                    if isinstance(part, Iterator):
                        made.extend([k, v] for k, v in part)
            else:
                made.append(item)
    return made


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        script, out = Path(folder) / "chain.py", Path(folder) / "trace.json"
        script.write_text(CHAIN.format(n=args.nodes, factor=1 + 10 / args.nodes))
        code, show_seconds, _ = measured(
            ["sh", "-c", f'"$0" "$@" > {out}', sys.executable, "-m", "gradtrace", "show",
             str(script), "--json"])
        if code != 0:
            sys.exit(f"gradtrace show exited {code}")
        trace = trace_from_dict(json.loads(out.read_text()))
    whole = best(lambda: sum(map(len, json_chunks(trace))), args.repeat)
    made = items(trace)
    stdlib = _encoder(False)
    print(f"chain of {args.nodes:,} ops: show --json {show_seconds:.2f} s; "
          f"{len(made):,} items")
    print(f"  json_chunks (the whole trace, as written)  {whole:6.3f} s")
    times = {"json (C encoder, as json_chunks)": best(lambda: sum(map(len, map(stdlib, made))),
                                                       args.repeat)}
    for name, encode in (("orjson", "dumps"), ("msgspec", "json.encode")):
        try:
            module = importlib.import_module(name)
        except ImportError:
            print(f"  {name}: not installed (pip install {name})")
            continue
        function = module
        for part in encode.split("."):
            function = getattr(function, part)
        times[name] = best(lambda f=function: sum(map(len, map(f, made))), args.repeat)
    for name, seconds in times.items():
        print(f"  items' text alone by {name:<33} {seconds:6.3f} s")
    ours = times["json (C encoder, as json_chunks)"]
    fastest = min(times.values())
    print(f"at most {ours - fastest:.3f} s to save by the fastest encoder: "
          f"{100 * (ours - fastest) / show_seconds:.1f}% of show --json")


if __name__ == "__main__":
    main()
