#!/usr/bin/env bash
# The lint gate: clang-format (.clang-format) over the tracked C++ sources, clang-tidy (checks in .clang-tidy,
# tests/ and tools/.clang-tidy) and cppcheck (suppressions in
# tools/scripts/cppcheck-suppressions.txt) over every C++ translation unit of a configured build (estimator, simulator,
# calibrate, the CPU parts of kernels, tools (with tools/bench), tests), and no -Wall -Wextra -Wpedantic warning in that
# build, then ruff, mypy and the doctests over the Python package. Exits 1 on any finding. The CUDA/HIP sources (kernels/gpu/*.cu) are not in a CPU build's
# compile_commands.json and are not linted here; nvcc and hipcc compile them with their own warnings.
#
#   tools/scripts/lint.sh [BUILD_DIR [BUILD_LOG]]
#
# BUILD_DIR: a configured build (default build, the release preset's); its compile_commands.json is used.
# BUILD_LOG: the output of a from-scratch `cmake --build` of BUILD_DIR (.ci/run keeps build/build.log); any
#   compiler warning in it fails the gate. Without it every translation unit is compiled again with
#   -fsyntax-only -Werror, which sees the front end's warnings but not GCC's optimiser-driven ones
#   (-Wmaybe-uninitialized, -Warray-bounds, ...), and costs about five more minutes on 2 cores.
# LINT_JOBS: parallel jobs (default 2). LINT_ANALYZER=1 adds clang-analyzer-* to the checks (about 4 more
#   minutes on 2 cores, which is why CI leaves it out).
# With a build log, the whole gate takes about 14 minutes on 2 cores (122 units), nearly all of it clang-tidy, whose
# matchers walk the AST of every header a unit includes (CLI11, nlohmann/json and GoogleTest alone cost 10-15 s each).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="$(cd "${1:-$root/build}" && pwd)"
log="${2:-}"
jobs="${LINT_JOBS:-2}"
db="$build/compile_commands.json"
[ -f "$db" ] || { echo "lint: no $db (configure the build first)" >&2; exit 2; }
[ -z "$log" ] || [ -f "$log" ] || { echo "lint: no build log $log" >&2; exit 2; }
tidy="$(command -v run-clang-tidy-14 || command -v run-clang-tidy)" ||
  { echo "lint: run-clang-tidy not found (tools/setup.sh installs clang-tidy)" >&2; exit 2; }
command -v cppcheck >/dev/null || { echo "lint: cppcheck not found (tools/setup.sh installs it)" >&2; exit 2; }
format="$(command -v clang-format-14 || command -v clang-format)" ||
  { echo "lint: clang-format not found (tools/setup.sh installs it)" >&2; exit 2; }

sources="^$root/(estimator|simulator|calibrate|kernels|tools|tests)/"
headers="$sources.*\\.(hpp|h)\$"
status=0
uncolour() { if [ -t 1 ]; then cat; else sed -r 's/\x1b\[[0-9;]*m//g'; fi; }
step() { echo "lint: $1"; SECONDS=0; }
done_step() { echo "lint: $1 ($SECONDS s)"; }

step "clang-format (.clang-format) over the tracked C++ sources"
mapfile -t cxx < <(git -C "$root" ls-files '*.cpp' '*.hpp' '*.cu' '*.h' 2>/dev/null)
if [ ${#cxx[@]} -eq 0 ]; then
  done_step "clang-format skipped: not a git checkout"
elif (cd "$root" && "$format" --dry-run --Werror "${cxx[@]}"); then
  done_step "clang-format clean (${#cxx[@]} files)"
else
  status=1
  done_step "clang-format FAILED: run $format -i on the files above"
fi

step "clang-tidy over $(grep -c '"file"' "$db") translation units, $jobs at a time"
checks=()
[ "${LINT_ANALYZER:-0}" = 1 ] && checks=(-checks='clang-analyzer-*')  # added to each directory's .clang-tidy
out="$(mktemp)"
trap 'rm -f "$out"' EXIT
if ! "$tidy" -p "$build" -j "$jobs" -quiet -header-filter="$headers" "${checks[@]}" "$sources" >"$out" 2>&1; then
  status=1
fi
# Keep the diagnostics, drop the per-file command lines and the counts of suppressed system-header warnings.
noise='^(clang-tidy|[0-9]+ warnings? (and [0-9]+ errors? )?generated|Suppressed [0-9]+ warnings|Use -header-filter)'
grep -vE "$noise" "$out" | uncolour || true
done_step "clang-tidy $([ $status = 0 ] && echo clean || echo FAILED)"

step "cppcheck"
if ! cppcheck --project="$db" --file-filter="$root/*" -i "$build" --std=c++20 --library=googletest \
    --enable=warning,style,performance,portability --inline-suppr \
    --suppressions-list="$root/tools/scripts/cppcheck-suppressions.txt" --error-exitcode=1 --quiet -j "$jobs" \
    --template='{file}:{line}:{column}: {severity}: {message} [{id}]'; then
  status=1
  done_step "cppcheck FAILED"
else
  done_step "cppcheck clean"
fi

step "compiler warnings (-Wall -Wextra -Wpedantic)"
if [ -n "$log" ]; then
  if grep -E ': warning: ' "$log"; then
    status=1
    done_step "warnings in $log: FAILED"
  else
    done_step "none in $log"
  fi
else
  # Every translation unit's own command, with -fsyntax-only -Werror instead of its output.
  if ! python3 - "$db" "$jobs" "$sources" <<'EOF'; then
import json, re, shlex, subprocess, sys
from concurrent.futures import ThreadPoolExecutor
db, jobs, sources = sys.argv[1], int(sys.argv[2]), re.compile(sys.argv[3])
def check(entry):
    args = entry["arguments"] if "arguments" in entry else shlex.split(entry["command"])
    out, skip = [], False
    for a in args:
        if skip: skip = False; continue
        if a in ("-o", "-MF", "-MT", "-MQ"): skip = True; continue
        if a in ("-c", "-MD", "-MMD"): continue
        out.append(a)
    p = subprocess.run(out + ["-fsyntax-only", "-Werror"], cwd=entry["directory"], capture_output=True, text=True)
    return p.returncode, p.stderr
entries = [e for e in json.load(open(db)) if sources.search(e["file"])]
failed = 0
with ThreadPoolExecutor(jobs) as pool:
    for code, err in pool.map(check, entries):
        if code: failed += 1; sys.stderr.write(err)
sys.exit(1 if failed else 0)
EOF
    status=1
    done_step "warnings: FAILED"
  else
    done_step "none (front end, -fsyntax-only)"
  fi
fi
step "Python: ruff and mypy (pyproject.toml), the package's doctests"
py_status=0
python3 -m ruff check "$root/tools/python" "$root/tests/python" "$root/tests/cli" "$root/tools/scripts" || py_status=1
(cd "$root/tools/python" && python3 -m mypy --config-file "$root/pyproject.toml" -p headroom) || py_status=1
if [ -d "$build/python/headroom" ]; then  # the built package (its compiled module) runs the doctests
  (cd "$build/python" && HEADROOM_DATA_DIR="$root/data" python3 -m pytest -q -p no:cacheprovider --doctest-modules \
    headroom/__init__.py) || py_status=1
fi
[ $py_status = 0 ] || status=1
done_step "Python $([ $py_status = 0 ] && echo clean || echo FAILED)"

[ $status = 0 ] && echo "lint: clean" || echo "lint: FAILED" >&2
exit $status
