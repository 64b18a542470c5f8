#!/usr/bin/env bash
# Builds otel-llm's collector distribution (manifest.yaml beside this script, with otel-llm's own
# exporter from storeexporter/) with the collector builder (ocb) once per hash of the manifest,
# the exporter's sources (go.mod, go.sum, *.go, schema.json), the builder's version and Go's
# version, and prints the binary's path on stdout (everything else goes to stderr).
#
# The binary is kept under ${XDG_CACHE_HOME:-$HOME/.cache}/otel-llm/collector/<hash>/, outside
# the checkout, so a fresh clone on the same machine (as CI makes) finds it; Go's module and build
# caches are the per-user defaults (`go env GOMODCACHE GOCACHE`), so a rebuild after a manifest
# change is quick too. A fresh machine builds from scratch: about 6.5 minutes on 2 cores and
# ~600 MB of modules. Concurrent runs take a lock (flock, where there is one) and build into a
# temporary folder that is renamed into place, so none sees a half-written binary.
#
# Environment: GO (the go command; default `go` on PATH, else /usr/local/go/bin/go),
# XDG_CACHE_HOME.
set -euo pipefail

OCB_VERSION=v0.161.0  # go.opentelemetry.io/collector/cmd/builder, the manifest's release
GO_MINIMUM=1.26       # what the v0.161.0 modules' and storeexporter's (arrow-go v18.9.0) go.mod ask for

say() { printf '==> %s\n' "$*" >&2; }
die() { printf 'collector/build.sh: %s\n' "$*" >&2; exit 1; }

here=$(cd "$(dirname "$0")" && pwd)
manifest=$here/manifest.yaml
[ -f "$manifest" ] || die "no manifest at $manifest"
exporter=$here/storeexporter  # the manifest's `path: ./storeexporter`
[ -f "$exporter/go.mod" ] || die "no storeexporter module at $exporter"

go_cmd=${GO:-}
if [ -z "$go_cmd" ]; then
  if command -v go >/dev/null 2>&1; then
    go_cmd=go
  elif [ -x /usr/local/go/bin/go ]; then
    go_cmd=/usr/local/go/bin/go
  else
    die "the Go toolchain was not found (no \`go\` on PATH, no /usr/local/go/bin/go): install" \
      "Go $GO_MINIMUM or later (https://go.dev/doc/install) or set GO=/path/to/go"
  fi
fi
command -v "$go_cmd" >/dev/null 2>&1 || die "GO=$go_cmd is not an executable"
# Never let go download another toolchain: use the one given, or fail clearly.
export GOTOOLCHAIN=local
go_version=$("$go_cmd" env GOVERSION 2>/dev/null) || die "\`$go_cmd env GOVERSION\` failed"
go_number=${go_version#go}
if ! printf '%s\n%s\n' "$GO_MINIMUM" "$go_number" | sort -V -C; then
  die "$go_version is too old: the collector needs Go $GO_MINIMUM or later (set GO=/path/to/go)"
fi

hash_of() {
  if command -v sha256sum >/dev/null 2>&1; then sha256sum; else shasum -a 256; fi
}
exporter_sources() {  # every file the exporter is built from, each named, in a stable order
  local file
  for file in $(cd "$exporter" && LC_ALL=C ls go.mod go.sum schema.json *.go); do
    printf '%s\n' "$file"
    cat "$exporter/$file"
  done
}
hash=$( {
  cat "$manifest"
  exporter_sources
  printf '%s\n%s\n' "$OCB_VERSION" "$go_version"
} | hash_of | cut -c1-16)

root=${XDG_CACHE_HOME:-$HOME/.cache}/otel-llm/collector
target=$root/$hash
binary=$target/otelcol-llm
if [ -x "$binary" ]; then
  printf '%s\n' "$binary"
  exit 0
fi

mkdir -p "$root"
if command -v flock >/dev/null 2>&1; then
  exec 9>"$root/.lock"
  if ! flock -n 9; then
    say "another run is building the collector (lock $root/.lock): waiting for it"
    flock 9
  fi
  if [ -x "$binary" ]; then  # another run built it while this one waited
    printf '%s\n' "$binary"
    exit 0
  fi
fi

work=$(mktemp -d "$root/.build.XXXXXX")
trap 'rm -rf "$work"' EXIT
started=$SECONDS

builder=$root/builder-$OCB_VERSION/builder
if [ ! -x "$builder" ]; then
  say "installing the collector builder $OCB_VERSION with $go_version"
  mkdir -p "$work/builder"
  GOBIN="$work/builder" CGO_ENABLED=0 "$go_cmd" install \
    "go.opentelemetry.io/collector/cmd/builder@$OCB_VERSION" >&2
  rm -rf "$root/builder-$OCB_VERSION"
  mv "$work/builder" "$root/builder-$OCB_VERSION"
fi

say "building the collector ($hash) into $target; a first build takes several minutes"
cp "$manifest" "$work/manifest.yaml"
mkdir "$work/storeexporter"
cp "$exporter"/go.mod "$exporter"/go.sum "$exporter"/schema.json "$exporter"/*.go "$work/storeexporter/"
# The manifest's output_path is relative: it lands in $work. ocb finds go on PATH.
go_dir=$(dirname "$(command -v "$go_cmd")")
(cd "$work" && PATH="$go_dir:$PATH" CGO_ENABLED=0 GOFLAGS=-buildvcs=false \
  "$builder" --config manifest.yaml >&2) || die "the collector build failed (see above)"

mkdir "$work/out"
mv "$work/otelcol-llm/otelcol-llm" "$work/out/otelcol-llm"
cp "$manifest" "$work/out/manifest.yaml"
"$work/out/otelcol-llm" --version >&2 || die "the built collector does not run"
# Without flock (macOS) another run may have finished first: keep its binary, drop ours.
[ -e "$target" ] || mv "$work/out" "$target" 2>/dev/null || true
[ -x "$binary" ] || die "could not move the collector into $target"
say "built in $((SECONDS - started)) s"
printf '%s\n' "$binary"
