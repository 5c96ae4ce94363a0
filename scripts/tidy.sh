#!/usr/bin/env bash
# clang-tidy with the checks of .clang-tidy, on the folders held clean (CTest "lint:
# clang-tidy" runs this) or on the files given.
#   scripts/tidy.sh BUILD_DIR                  the held folders; exit 1 on any warning
#   scripts/tidy.sh BUILD_DIR --changed [REF]  the .cpp files changed since REF (default
#                                              main), held or not: before a commit
#   scripts/tidy.sh BUILD_DIR FILE...          these files
# BUILD_DIR must hold compile_commands.json (every CMake build of etc writes it).
# A folder joins HELD once it is clean; the list only grows.
set -uo pipefail
cd "$(dirname "$0")/.."
HELD=(src/support src/graph src/format src/consteval src/passes src/partition src/export src/runtime
      src/frontends/frontends.cpp
      src/frontends/model_format.cpp src/frontends/import_report.cpp)

build=${1:?usage: scripts/tidy.sh BUILD_DIR [--changed [REF] | FILE...]}
shift
if [[ ! -f $build/compile_commands.json ]]; then
  echo "tidy: $build/compile_commands.json not found (configure a build first)" >&2
  exit 2
fi
tidy=$(command -v clang-tidy-14 || command -v clang-tidy) || {
  echo "tidy: clang-tidy not found (scripts/install-deps.sh installs it)" >&2
  exit 2
}

files=()
if [[ $# -ge 1 && $1 == --changed ]]; then
  ref=${2:-main}
  mapfile -t files < <(git diff --name-only --diff-filter=AM "$ref" -- 'src/*.cpp' 'apps/*.cpp' | sort)
elif [[ $# -ge 1 ]]; then
  files=("$@")
else
  mapfile -t files < <(find "${HELD[@]}" -name '*.cpp' | sort)
fi
if [[ ${#files[@]} -eq 0 ]]; then
  echo "tidy: no files to check"
  exit 0
fi

# The build's compile commands without the GCC-only flags clang's driver refuses (the
# depthwise kernels are built with -fno-tree-loop-distribute-patterns).
db=$(mktemp -d)
out=$(mktemp)
trap 'rm -rf "$out" "$db"' EXIT
sed -e 's/ -fno-tree-loop-distribute-patterns//g' "$build/compile_commands.json" > "$db/compile_commands.json"
build=$db

# Clean results are kept by content (scripts/tidy_keys.py: the compile command and the
# preprocessed file, every header included, with clang-tidy's version and .clang-tidy): a file
# whose key was clean once is not checked again. ETC_TIDY_CACHE=0 checks every file.
cache=${ETC_CACHE_DIR:-$HOME/.cache/etc}/tidy
todo=()
keys=()
cached=0
if [[ ${ETC_TIDY_CACHE:-1} != 0 ]] && mkdir -p "$cache" 2>/dev/null; then
  salt=$({ "$tidy" --version; cat .clang-tidy; } | sha256sum | cut -d' ' -f1)
  while read -r key file; do
    if [[ $key != none && -e $cache/$key ]]; then
      cached=$((cached + 1))
    else
      todo+=("$file")
      keys+=("$key")
    fi
  done < <(python3 scripts/tidy_keys.py "$db/compile_commands.json" "$PWD" "$salt" "${files[@]}")
else
  todo=("${files[@]}")
  for f in "${files[@]}"; do keys+=(none); done
fi

# Two at a time, each file's findings to its own file; every warning of every file is
# printed, then the count.
per=$(mktemp -d)
trap 'rm -rf "$out" "$db" "$per"' EXIT
for i in "${!todo[@]}"; do printf '%s %s\n' "$i" "${todo[$i]}"; done |
  xargs -r -P 2 -L 1 sh -c 'o=$("$0" -p "$1" --quiet "$4" 2>/dev/null); rc=$?
    printf "%s\n" "$o" | grep -A3 "warning:\|error:" > "$2/$3"
    [ $rc -eq 0 ] || [ -s "$2/$3" ] || echo "$4: error: clang-tidy exited with status $rc" > "$2/$3"
    true' "$tidy" "$build" "$per"
for i in "${!todo[@]}"; do
  if [[ -s $per/$i ]]; then
    cat "$per/$i" >> "$out"
  elif [[ ${keys[$i]} != none ]]; then
    touch "$cache/${keys[$i]}"
  fi
done
n=$(grep -c "warning:\|error:" "$out")
cat "$out"
if [[ $n -ne 0 ]]; then
  echo "tidy: $n finding(s) in ${#files[@]} file(s)"
  exit 1
fi
echo "tidy: ${#files[@]} file(s) clean ($cached unchanged since a clean check)"
