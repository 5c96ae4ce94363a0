#!/usr/bin/env python3
"""Keys for scripts/tidy.sh's cache of clean clang-tidy results (what ccache is to the compiler).

  tidy_keys.py COMPILE_COMMANDS SOURCE_ROOT SALT FILE...

Prints "KEY FILE" per file: the SHA-256 of SALT (clang-tidy's version and .clang-tidy), the
file's compile command and its preprocessed text (every header it includes, as the compiler
sees them), with SOURCE_ROOT written as a placeholder so that clones at other paths share
keys. clang-tidy's findings depend on nothing else, so a file whose key was clean once is clean
again. KEY is "none" where the file has no compile command or does not preprocess (tidy then
runs and reports it).
"""
import concurrent.futures
import hashlib
import json
import os
import shlex
import subprocess
import sys


def main() -> int:
    db_path, root, salt, files = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    root = os.path.realpath(root)
    entries = {}
    with open(db_path) as f:
        for e in json.load(f):
            path = os.path.realpath(os.path.join(e["directory"], e["file"]))
            entries[path] = e

    def key(file: str) -> str:
        e = entries.get(os.path.realpath(file))
        if e is None:
            return "none"
        argv = shlex.split(e["command"]) if "command" in e else list(e["arguments"])
        source = os.path.realpath(os.path.join(e["directory"], e["file"]))
        # The command without its output and its source, then the source preprocessed.
        pre = []
        skip = False
        for a in argv:
            if skip:
                skip = False
                continue
            if a == "-o":
                skip = True
                continue
            if a == "-c" or os.path.realpath(os.path.join(e["directory"], a)) == source:
                continue
            pre.append(a)
        pre += ["-E", "-P", source]
        r = subprocess.run(pre, cwd=e["directory"], capture_output=True)
        if r.returncode != 0:
            return "none"
        h = hashlib.sha256()
        h.update(salt.encode())
        h.update(b"\0" + " ".join(argv).replace(root, "@SRC@").encode() + b"\0")
        h.update(r.stdout.replace(root.encode(), b"@SRC@"))
        return h.hexdigest()

    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        for file, k in zip(files, pool.map(key, files)):
            print(k, file)
    return 0


if __name__ == "__main__":
    sys.exit(main())
