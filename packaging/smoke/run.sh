#!/usr/bin/env bash
# Installs each release artifact in DIST into an empty place outside the
# checkout, as a user would, runs the scenario through it there, and holds
# the answers to the scenario and to each other (check.py). A file missing
# from a package fails here.
#
#   bash packaging/smoke/run.sh DIST
set -euo pipefail
dist=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
version=$(cat "$here/../../VERSION")
sha=$(cut -d' ' -f1 "$dist/ctxkernel.wasm.sha256")
work=$(mktemp -d "${TMPDIR:-/tmp}/ctxkernel-smoke.XXXXXX")
trap 'rm -rf "$work"' EXIT
# The scenario and the programs are copied too: nothing is read from the checkout.
cp -r "$here/scenario.json" "$here/python" "$here/node" "$here/jvm" "$here/ctxk" "$work/"
# Each quick start as the README prints it.
mkdir "$work/quick"
python3 "$here/quickstart.py" "$here/../../README.md" python "$work/quick/quick.py"
python3 "$here/quickstart.py" "$here/../../README.md" ts "$work/node/quick.mts"
python3 "$here/quickstart.py" "$here/../../README.md" java "$work/jvm/src/main/java/Quick.java"
answers=$work/answers
mkdir "$answers"
outside() { # the path a package was loaded from must lie in the smoke directory
  case "$2" in "$work"/*) ;; *) echo "$1 was loaded from $2, not from its installed package" >&2; exit 1 ;; esac
}

echo "== Python: the wheel alone in a new virtualenv"
python3 -m venv "$work/venv"
"$work/venv/bin/pip" install -q --disable-pip-version-check "$dist/ctxkernel_sdk-$version-py3-none-any.whl"
(cd "$work/python" && outside ctxkernel_sdk "$("$work/venv/bin/python" -c 'import ctxkernel_sdk; print(ctxkernel_sdk.__file__)')" \
  && "$work/venv/bin/python" smoke.py "$work/scenario.json" "$answers/python.jsonl" "$work/python.sqlite")
echo "== Python: the README's quick start, run and type-checked; a misspelled field must fail the check"
"$work/venv/bin/pip" install -q --disable-pip-version-check mypy==2.4.1
(cd "$work/quick" && "$work/venv/bin/python" quick.py && "$work/venv/bin/python" -m mypy --strict --no-incremental quick.py \
  && sed '0,/"sessionId"/s//"sesionId"/' quick.py > misspelled.py && grep -q '"sesionId"' misspelled.py \
  && if "$work/venv/bin/python" -m mypy --strict --no-incremental misspelled.py > misspelled.txt; then
       echo "mypy --strict passed a misspelled field" >&2; exit 1
     fi && grep -q 'Extra key "sesionId"' misspelled.txt)

echo "== Node: the tarball in a new project, from ESM and from CommonJS"
(cd "$work/node" && printf '{"name": "ctxkernel-smoke", "private": true}\n' > package.json \
  && npm install --no-audit --no-fund --loglevel=error "$dist/ctxkernel-$version.tgz" \
  && outside ctxkernel "$(node -p 'require.resolve("ctxkernel")')" \
  && node smoke.mjs "$work/scenario.json" "$answers/node-esm.jsonl" "$work/node-esm.sqlite" \
  && node smoke.cjs "$work/scenario.json" "$answers/node-cjs.jsonl" "$work/node-cjs.sqlite")
echo "== Node: the README's quick start, compiled by tsc and run; a misspelled field must fail the compile"
(cd "$work/node" && npm install --no-audit --no-fund --loglevel=error typescript@5.9.3 \
  && tsc() { node node_modules/typescript/bin/tsc --strict --module nodenext --moduleResolution nodenext --target es2022 "$@"; } \
  && tsc --outDir out quick.mts && node out/quick.mjs \
  && sed "0,/sessionId/s//sesionId/" quick.mts > misspelled.mts && grep -q sesionId misspelled.mts \
  && if tsc --noEmit misspelled.mts > misspelled.txt; then echo "tsc passed a misspelled field" >&2; exit 1; fi \
  && grep -q "'sesionId' does not exist" misspelled.txt)

echo "== JVM: the jar, its sources and its pom installed, then a new Maven project that depends on it"
# The artifact the consumer resolves is the one from DIST, not one `make jvm` installed.
rm -rf "$HOME/.m2/repository/dev/ctxkernel/ctxkernel/$version"
(cd "$work" && mvn -q -B --no-transfer-progress org.apache.maven.plugins:maven-install-plugin:3.1.4:install-file \
  -Dfile="$dist/ctxkernel-$version.jar" -DpomFile="$dist/ctxkernel-$version.pom" -Dsources="$dist/ctxkernel-$version-sources.jar")
(cd "$work/jvm" && mvn -q -B --no-transfer-progress -Dctxkernel.version="$version" compile \
  org.apache.maven.plugins:maven-dependency-plugin:3.11.0:build-classpath -Dmdep.outputFile=classpath.txt \
  && grep -q "dev/ctxkernel/ctxkernel/$version/ctxkernel-$version.jar" classpath.txt \
  && java -cp "target/classes:$(cat classpath.txt)" smoke.Smoke "$work/scenario.json" "$answers/jvm.jsonl" "$work/jvm.sqlite")
echo "== JVM: the README's quick start, compiled with the project and run; a misspelled field must fail javac"
(cd "$work/jvm" && java -cp "target/classes:$(cat classpath.txt)" Quick \
  && mkdir misspelled && sed "0,/sessionId/s//sesionId/" src/main/java/Quick.java > misspelled/Quick.java && grep -q sesionId misspelled/Quick.java \
  && if javac -d misspelled -cp "$(cat classpath.txt)" misspelled/Quick.java 2> misspelled/javac.txt; then
       echo "javac passed a misspelled field" >&2; exit 1
     fi && grep -q "cannot find symbol" misspelled/javac.txt && grep -q "method sesionId" misspelled/javac.txt)

echo "== ctxk: the binary alone, on the system's C library only"
mkdir "$work/bin"
cp "$dist/ctxk-$version-$(uname -m)-linux" "$work/bin/ctxk"
libraries=$(ldd "$work/bin/ctxk" | awk '{print $1}' | grep -vE '^(linux-vdso\.so\.1|/lib64/ld-linux-x86-64\.so\.2|libc\.so\.6|libm\.so\.6|libgcc_s\.so\.1)$' || true)
[ -z "$libraries" ] || { echo "ctxk links libraries beyond the C library: $libraries" >&2; exit 1; }
(cd "$work/ctxk" && python3 smoke.py "$work/bin/ctxk" "$work/scenario.json" "$answers/ctxk.jsonl" "$work/ctxk.sqlite")

python3 "$here/check.py" "$sha" "$version" "$answers"/{python,node-esm,node-cjs,jvm,ctxk}.jsonl
