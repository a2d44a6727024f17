#!/usr/bin/env bash
# build.sh builds the strata-kjv training corpus from pinned Debian packages:
# the King James Version (bible-kjv-text, read with bible-kjv's `bible`
# program) and three public-domain Bible commentaries in SWORD format
# (Matthew Henry's Concise Commentary, the Scofield Reference Notes of 1917
# and Spurgeon's Treasury of David). See models/strata-kjv/DATA.md for the
# licence evidence and tools/corpus/main.go for the text format.
#
# Usage: tools/corpus/build.sh [--sources LIST] [DIR]
#
# DIR defaults to /tmp/strata-corpus. LIST is a comma-separated subset of
# kjv,mhcc,scofield,tdavid (the default: all of them; kjv is required).
#
# Writes:
#   DIR/train.txt, DIR/heldout.txt   the corpus (UTF-8, documents separated
#                                     by an empty line)
#   DIR/licenses/PACKAGE.copyright   each package's Debian copyright file
#   DIR/work/debs/*.deb               the downloaded packages (kept, so that
#                                     a second run downloads nothing)
#   DIR/work/pkgs/PACKAGE/            the unpacked packages
#   DIR/work/kjv-verses.txt           the KJV as `bible` prints it
#
# Idempotent: a .deb already present with the right sha256 is not
# downloaded again, and the outputs are rebuilt from scratch each run and
# are byte-identical every time. Needs apt-get (with package lists, so run
# `apt-get update` once on a fresh machine), dpkg-deb, sha256sum, go, and
# libreadline8 for the bible program (amd64 only: its .deb is pinned for
# amd64).
set -euo pipefail

sources=kjv,mhcc,scofield,tdavid
if [[ ${1:-} == --sources ]]; then
	[[ $# -ge 2 ]] || { echo "build.sh: --sources needs a value" >&2; exit 2; }
	sources=$2
	shift 2
fi
out=${1:-/tmp/strata-corpus}
[[ $# -le 1 ]] || { echo "usage: tools/corpus/build.sh [--sources LIST] [DIR]" >&2; exit 2; }

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

# name version architecture sha256 of the .deb, from Debian 12 (bookworm).
packages=(
	"bible-kjv-text 4.38 all d61b6aad4c51ba9e2800b825325fa6a09e99a0d02a9bb6dc4724fcc4995a1b7a"
	"bible-kjv 4.38 amd64 75a49c032a6efa9faa2beb4a9acb70974380122906329d0e100de36cc88ff02d"
	"sword-comm-mhcc 2.0-1 all 06f748215de78ff48fdfdee93e3ffc5af6318b976485f7aedf22309236967e35"
	"sword-comm-scofield 2.1-1 all 0c11a9533d4870ec40cc72792ecde8aae6e4cc00eca12301150aac018fd5dfcb"
	"sword-comm-tdavid 2.1-1 all bcbfad701c5c4a061475b58309cebc42755a59e87478c8355227c5e046412b3f"
)

log() { printf 'build.sh: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

for tool in apt-get dpkg-deb sha256sum go; do
	command -v "$tool" >/dev/null || die "$tool is not installed"
done
arch=$(dpkg --print-architecture)
[[ $arch == amd64 ]] || die "the bible-kjv .deb is pinned for amd64; this machine is $arch"

debs="$out/work/debs"
pkgs="$out/work/pkgs"
mkdir -p "$debs" "$pkgs" "$out/licenses"

for entry in "${packages[@]}"; do
	read -r name version pkgarch sha <<<"$entry"
	deb="$debs/${name}_${version}_${pkgarch}.deb"
	if [[ -f $deb ]] && echo "$sha  $deb" | sha256sum --check --status; then
		log "$name $version: cached"
	else
		rm -f "$deb"
		log "$name $version: downloading"
		(cd "$debs" && apt-get download -q "$name=$version" >&2) ||
			die "apt-get download $name=$version failed (run apt-get update first?)"
		[[ -f $deb ]] || die "apt-get download $name=$version did not write $deb"
		if ! echo "$sha  $deb" | sha256sum --check --status; then
			got=$(sha256sum "$deb" | cut -d' ' -f1)
			rm -f "$deb"
			die "$deb: sha256 $got, want $sha"
		fi
	fi
	rm -rf "$pkgs/$name"
	dpkg-deb -x "$deb" "$pkgs/$name"
	cp "$pkgs/$name/usr/share/doc/$name/copyright" "$out/licenses/$name.copyright"
done

log "dumping the KJV with bible -f Gen1:1-Rev22:21"
"$pkgs/bible-kjv/usr/bin/bible" -f -p "$pkgs/bible-kjv-text/usr/lib" Gen1:1-Rev22:21 \
	</dev/null >"$out/work/kjv-verses.txt" ||
	die "the bible program failed (it needs libc6 and libreadline8)"

(cd "$root" && go run ./tools/corpus -kjv "$out/work/kjv-verses.txt" -pkgs "$pkgs" \
	-sources "$sources" -out "$out")

(cd "$out" && sha256sum train.txt heldout.txt) >&2
log "done: $out/train.txt, $out/heldout.txt"
