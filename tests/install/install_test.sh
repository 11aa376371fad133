#!/usr/bin/env bash
# Installs this build into a fresh prefix, then builds and runs a small program against it
# twice — through find_package(attn 0.1) and through pkg-config — and configures attn as a
# subproject. Run by ctest: install_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1 source=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix

cmake --install "$build" --prefix "$prefix" >"$work/install.log"
for f in include/attn/attn.hpp include/attn/version.hpp bin/attn; do
  [[ -e $prefix/$f ]] || { echo "install: $f missing"; exit 1; }
done
"$prefix/bin/attn" --version | grep -q "^attn [0-9]" || { echo "installed attn --version"; exit 1; }

# The man page (every command's help in it) and the bash completion.
man_page=$prefix/share/man/man1/attn.1
[[ -f $man_page ]] || { echo "install: share/man/man1/attn.1 missing"; exit 1; }
for section in "attn train" "attn bpe encode" "attn bench decode" "ATTN_NUM_THREADS"; do
  grep -q "$section" "$man_page" || { echo "attn.1 has no '$section'"; exit 1; }
done
completion=$prefix/share/bash-completion/completions/attn
[[ -f $completion ]] || { echo "install: the bash completion is missing"; exit 1; }
completes() {  # completes WORD... -> the candidates for the last word
  PATH="$prefix/bin:$PATH" bash -c 'source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1));
    _attn; printf "%s\n" "${COMPREPLY[@]}"' _ "$completion" "$@"
}
completes attn tr | grep -qx train || { echo "completion: 'attn tr' does not give train"; exit 1; }
completes attn bpe en | grep -qx encode || { echo "completion: 'attn bpe en'"; exit 1; }
completes attn train --n-e | grep -qx -- --n-embd || { echo "completion: 'attn train --n-e'"; exit 1; }
completes attn generate --top | grep -qx -- --top-p || { echo "completion: 'attn generate --top'"; exit 1; }

# The Python package, importable from the prefix's dist-packages (when it was built).
if package=$(find "$prefix" -path '*dist-packages/attn/__init__.py' | head -1) && [[ -n $package ]]; then
  PYTHONPATH=$(dirname "$(dirname "$package")") /usr/bin/python3 -c \
    'import attn, numpy as np; q = np.ones((1, 2, 3, 4), np.float32); assert attn.sdpa(q, q, q).shape == q.shape' ||
    { echo "the installed attn package does not import"; exit 1; }
fi

# find_package
cmake -S "$source/tests/install/consumer" -B "$work/cmake" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_BUILD_TYPE=Release >"$work/configure.log" || { cat "$work/configure.log"; exit 1; }
cmake --build "$work/cmake" >"$work/build.log" || { cat "$work/build.log"; exit 1; }
"$work/cmake/consumer"

# A version the package does not satisfy is refused.
sed 's/find_package(attn 0.1 REQUIRED)/find_package(attn 9.0 REQUIRED)/' \
  "$source/tests/install/consumer/CMakeLists.txt" >"$work/CMakeLists.txt"
mkdir -p "$work/v9" && cp "$work/CMakeLists.txt" "$source/tests/install/consumer/main.cpp" "$work/v9/"
if cmake -S "$work/v9" -B "$work/v9/build" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null 2>&1; then
  echo "find_package(attn 9.0) accepted version $("$prefix/bin/attn" --version)"; exit 1
fi

# pkg-config
pc_dir=$(dirname "$(find "$prefix" -name attn.pc)")
flags=$(PKG_CONFIG_PATH=$pc_dir pkg-config --cflags --libs attn)
[[ $(PKG_CONFIG_PATH=$pc_dir pkg-config --modversion attn) == $("$prefix/bin/attn" --version | cut -d' ' -f2) ]] ||
  { echo "attn.pc's version differs from attn --version"; exit 1; }
# shellcheck disable=SC2086
g++ -O1 "$source/tests/install/consumer/main.cpp" -o "$work/pkg_consumer" $flags
"$work/pkg_consumer"

# attn::distributed through find_package(attn COMPONENTS distributed), when it was built.
if [[ -f $prefix/include/attn/distributed.hpp ]]; then
  mkdir -p "$work/dist_src"
  cat >"$work/dist_src/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.25)
project(attn_distributed_consumer LANGUAGES CXX)
find_package(attn 0.1 REQUIRED COMPONENTS distributed)
add_executable(dist_consumer main.cpp)
target_link_libraries(dist_consumer PRIVATE attn::distributed)
CMAKE
  cat >"$work/dist_src/main.cpp" <<'CPP'
#include <attn/distributed.hpp>
int main() {  // no MPI job needed: where rank 1 of 2 sits in a zigzag sequence of 16
  const auto runs = attn::distributed::sequence_runs(16, 2, 1, attn::distributed::SequenceLayout::kZigzag);
  return runs.size() == 2 && runs[0].begin == 4 && runs[1].begin == 8 ? 0 : 1;
}
CPP
  cmake -S "$work/dist_src" -B "$work/dist" -DCMAKE_PREFIX_PATH="$prefix"     -DCMAKE_BUILD_TYPE=Release >"$work/dist.log" 2>&1 || { cat "$work/dist.log"; exit 1; }
  cmake --build "$work/dist" >>"$work/dist.log" 2>&1 || { cat "$work/dist.log"; exit 1; }
  "$work/dist/dist_consumer" || { echo "attn::distributed consumer: wrong runs"; exit 1; }
fi

# A subproject: configure only (building the library again would take minutes).
cmake -S "$source/tests/install/superproject" -B "$work/super" -DATTN_SOURCE_DIR="$source" \
  >"$work/super.log" 2>&1 || { cat "$work/super.log"; exit 1; }
echo "install_test: find_package, pkg-config and add_subdirectory consumers all good"
