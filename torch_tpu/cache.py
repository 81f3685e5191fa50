"""The persistent compile cache from the command line.

    python -m torch_tpu.cache [--dir DIR] stats [--verify]
    python -m torch_tpu.cache [--dir DIR] prune --max-bytes N      (N: bytes, or 500M, 10G)
    python -m torch_tpu.cache [--dir DIR] clear
    python -m torch_tpu.cache [--dir DIR] warm SCRIPT [ARGS...]

DIR defaults to TORCH_TPU_CACHE_DIR, else `torch_tpu` under the user's cache folder
($XDG_CACHE_HOME or ~/.cache). `warm` runs SCRIPT once with the cache on, so that the next run
of the same program (same shapes, same plugin and torch_tpu version) starts without compiling.
None of the commands starts a PJRT plugin except `warm` (in the script's own process).
"""
import argparse
import datetime
import os
import subprocess
import sys
import time
from typing import List, Optional

from . import _C


def default_dir() -> str:
    return _C._compile_cache_config()["directory"]


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} B" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024.0
    return str(n)


def _bytes_arg(text: str) -> int:
    value = _C._parse_bytes(text)
    if value is None:
        raise argparse.ArgumentTypeError(f"expected bytes, e.g. 1000000, 500M or 10G; got {text!r}")
    return value


def _when(t: int) -> str:
    return datetime.datetime.fromtimestamp(t).strftime("%Y-%m-%d %H:%M:%S") if t else "-"


def print_stats(directory: str, verify: bool = False) -> dict:
    info = _C._cache_dir_inspect(directory, verify)
    print(f"directory:        {directory}{'' if info['exists'] else ' (does not exist)'}")
    print(f"entries:          {info['entries']}")
    print(f"size:             {_size(info['bytes'])}")
    bad = "invalid entries:  " + str(info["invalid_entries"])
    print(bad + (" (checksums verified)" if verify else " (headers checked; --verify reads every entry)"))
    print(f"oldest / newest:  {_when(info['oldest'])} / {_when(info['newest'])}")
    if info["temporary_files"]:
        print(f"temporary files:  {info['temporary_files']} (writes in progress, or left by a crash)")
    for group, n in sorted(info["groups"].items()):
        print(f"  {n:6d}  {group}")
    return info


def warm(directory: str, script: str, args: List[str]) -> int:
    env = dict(os.environ)
    env.pop("TORCH_TPU_CACHE", None)
    env["TORCH_TPU_CACHE_DIR"] = directory
    before = _C._cache_dir_inspect(directory, False)
    print(f"warming {directory} with: {script} {' '.join(args)}".rstrip(), flush=True)
    t0 = time.perf_counter()
    rc = subprocess.call([sys.executable, script, *args], env=env)
    seconds = time.perf_counter() - t0
    after = _C._cache_dir_inspect(directory, False)
    added = after["entries"] - before["entries"]
    print(f"{'finished' if rc == 0 else f'the script exited with status {rc}'} in {seconds:.1f} s: "
          f"{added:+d} entries, {after['entries']} in the cache ({_size(after['bytes'])})")
    return rc


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m torch_tpu.cache", description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", default=None,
                        help="cache directory (default: TORCH_TPU_CACHE_DIR, else ~/.cache/torch_tpu)")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("stats", help="entries and bytes in the directory")
    p.add_argument("--verify", action="store_true", help="read every entry and check its checksum")
    p = sub.add_parser("prune", help="remove least-recently-used entries down to a size")
    p.add_argument("--max-bytes", type=_bytes_arg, required=True)
    sub.add_parser("clear", help="remove every entry")
    p = sub.add_parser("warm", help="run a script once with the cache on")
    p.add_argument("script")
    p.add_argument("args", nargs=argparse.REMAINDER)
    ns = parser.parse_args(argv)
    directory = os.path.abspath(ns.dir or default_dir() or "")
    if not directory or directory == os.path.abspath(""):
        parser.error("no cache directory: pass --dir or set TORCH_TPU_CACHE_DIR")
    if ns.command == "stats":
        info = print_stats(directory, ns.verify)
        return 1 if ns.verify and info["invalid_entries"] else 0
    if ns.command == "prune":
        r = _C._cache_dir_prune(directory, ns.max_bytes)
        print(f"removed {r['removed']} entries ({_size(r['removed_bytes'])}); "
              f"{_size(r['remaining_bytes'])} remain in {directory}")
        return 0
    if ns.command == "clear":
        n = _C._cache_dir_clear(directory)
        print(f"removed {n} entries from {directory}")
        return 0
    return warm(directory, ns.script, ns.args)


if __name__ == "__main__":
    sys.exit(main())
