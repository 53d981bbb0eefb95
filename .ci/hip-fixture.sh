#!/usr/bin/env bash
# Builds REAL AMDGPU test fixtures on a CPU-only Debian 12 machine (as root), for the tests of the code-object
# reader: Debian's own ROCm toolchain (hipcc and HIP 7.2.x from `experimental`, clang/LLVM 22 from `sid`) runs in
# an mmdebstrap sid chroot (its libraries need glibc 2.38), compiles tests/support/hip/kernel.hip into offload
# bundles and code objects, and that same LLVM's tools write the reference outputs the tests compare against.
#
#   hip-fixture.sh OUT_DIR
#
# OUT_DIR gets (fixture.json says the same per file, with flags and versions):
#   bundle.so, bundle-compressed.so   hipcc -shared for gfx942 and gfx950: an uncompressed offload bundle
#                                     (__CLANG_OFFLOAD_BUNDLE__) / a compressed one (CCOB) in .hip_fatbin
#   bundle.fatbin, bundle-compressed.fatbin   those .hip_fatbin sections, as llvm-objcopy dumps them
#   gfx942.co, gfx950.co, gfx942-xnack.co, gfx942-v5.co   device-only code objects (gfx942:xnack+; code object v5)
#   readelf/<name>.txt                llvm-readelf --file-header of each .co
#   bundles.txt                       clang-offload-bundler --list of each bundle, llvm-readelf --sections bundle.so
#   aiter-hsa-readelf.txt             llvm-readelf --file-header of every file under aiter's hsa/ at the pinned
#                                     commit (readelf's text only, none of aiter's bytes), and which are not ELF
#   fixture.json, DONE                the description; the hash of the inputs (this script, kernel.hip)
# Environment: HIP_CHROOT (default /var/cache/atom-build/hip-chroot) the chroot, kept and reused while its package
# list is the same; ATOM_BUILD_MIRROR (default ../shared/upstream beside the checkout) the folder of aiter.git.
# Idempotent: when OUT_DIR/DONE records the same inputs, it exits at once.
set -euo pipefail

usage="usage: hip-fixture.sh OUT_DIR"
out=${1:?$usage}
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
self="$repo/.ci/hip-fixture.sh"
src="$repo/tests/support/hip/kernel.hip"
root=${HIP_CHROOT:-/var/cache/atom-build/hip-chroot}
aiter_git=${ATOM_BUILD_MIRROR:-$(cd "$repo/.." && pwd)/shared/upstream}/aiter.git
aiter_commit=79366eb81451e20bc206f63ab56cae8c63c927ed
[[ $root == /?* && $root != */ ]] || { echo "HIP_CHROOT must be an absolute path, not /: $root" >&2; exit 2; }
[[ -d $aiter_git ]] || { echo "no aiter.git in ${aiter_git%/aiter.git} (ATOM_BUILD_MIRROR)" >&2; exit 1; }
mkdir -p "$out"
out=$(cd "$out" && pwd)

inputs="inputs $(cat "$self" "$src" | sha256sum | cut -d' ' -f1)
script $(sha256sum < "$self" | cut -d' ' -f1)
kernel $(sha256sum < "$src" | cut -d' ' -f1)"
if [[ -f $out/DONE && $(cat "$out/DONE") == "$inputs" ]]; then
  echo "hip-fixture: $out is up to date"
  exit 0
fi

t0=$(date +%s.%N) tp=$t0
phase() {  # NAME: the seconds since the last phase
  local now; now=$(date +%s.%N)
  awk -v n="$1" -v a="$tp" -v b="$now" 'BEGIN{printf "hip-fixture: %-10s %7.1f s\n", n, b - a}'
  tp=$now
}

# 1. The host's tools: mmdebstrap makes the chroot, git reads aiter's tree, python3 writes fixture.json.
need_apt=()
command -v mmdebstrap >/dev/null || need_apt+=(mmdebstrap)
command -v git >/dev/null || need_apt+=(git)
command -v python3 >/dev/null || need_apt+=(python3)
if ((${#need_apt[@]})); then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi
phase host

# 2. The chroot: sid, with experimental's ROCm 7.2 (hipcc 7.2.4 needs clang-22, llvm-22 and lld-22 of sid). Only
# what is named /experimental comes from there (and what that needs): `-t experimental` would take its glibc too.
packages="hipcc/experimental libamdhip64-dev/experimental rocm-device-libs-22/experimental
libamd-comgr-dev/experimental libhsa-runtime-dev/experimental llvm-22 clang-22"
stamp="$root/.atom-build-hip"
mkdir -p "$(dirname "$root")"
exec 9>"$root.lock"  # one run at a time builds or uses the chroot
flock 9
mounted=
cleanup() { if [[ -n $mounted ]]; then umount "$root/proc" || umount -l "$root/proc"; fi; }
trap cleanup EXIT
if [[ ! -f $stamp || $(cat "$stamp") != "$packages" ]]; then
  mountpoint -q "$root/proc" 2>/dev/null && umount -l "$root/proc"
  rm -rf --one-file-system "$root" "$root.partial"
  sources=$(mktemp --suffix=.sources)
  # The mirror of the host's first sources stanza (the proxy the host uses), pointed at sid and experimental.
  awk 'BEGIN{RS="";ORS="\n\n"} NR==1' /etc/apt/sources.list.d/debian.sources \
    | sed -E 's/^Suites:.*/Suites: sid experimental/' > "$sources"
  # The setup hook copies the host's CA bundle in: a mirror behind an https proxy is trusted inside as outside.
  mmdebstrap --quiet --mode=root --variant=minbase \
    --aptopt='Acquire::Check-Valid-Until "false"' --aptopt='APT::Install-Recommends "false"' \
    --include="$(tr '\n' ' ' <<<"$packages")" \
    --setup-hook='mkdir -p "$1/etc/ssl/certs" && cp /etc/ssl/certs/ca-certificates.crt "$1/etc/ssl/certs/"' \
    --customize-hook='rm -rf "$1"/var/cache/apt/archives/*.deb "$1"/var/lib/apt/lists/*_Packages*' \
    sid "$root.partial" "$sources"
  rm -f "$sources"
  mv "$root.partial" "$root"
  printf '%s' "$packages" > "$stamp"
fi
mount -t proc proc "$root/proc"  # hipcc reads /proc (its own path, the CPU count)
mounted=1
inroot() {  # COMMAND...: run in the chroot, in /build, with a clean environment
  chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LC_ALL=C.UTF-8 TMPDIR=/tmp \
    /bin/bash -c 'cd /build && exec "$@"' bash "$@"
}
phase chroot

# 3. Compile. hipcc finds its clang in one LLVM (InstalledDir); that LLVM's readelf, objcopy and bundler read.
# A fixed -cuid (the default is a hash of the command line, -o included): the outputs are reproducible, and each
# entry of a bundle is byte for byte the device-only code object of its arch. -c: no --hip-link that clang ignores.
rm -rf "$root/build"
mkdir -p "$root/build/out/readelf" "$root/build/unbundled"
cp "$src" "$root/build/kernel.hip"
inroot bash -euo pipefail -c '
  llvm=$(hipcc --version | sed -n "s/^InstalledDir: //p" | head -n1)
  [[ -x $llvm/clang-offload-bundler && -x $llvm/llvm-readelf ]] || { echo "no LLVM tools beside hipcc'\''s clang: $llvm" >&2; exit 1; }
  echo "$llvm" > llvm-dir
  hip() { echo "+ hipcc $*" >> commands.txt; hipcc "$@"; }
  fat=(-cuid=atom-build-fixture --offload-arch=gfx942 --offload-arch=gfx950 -O2 -fPIC -shared kernel.hip)
  hip "${fat[@]}" --no-offload-compress -o out/bundle.so
  hip "${fat[@]}" --offload-compress -o out/bundle-compressed.so
  dev=(-cuid=atom-build-fixture -O2 -c --offload-device-only --no-gpu-bundle-output kernel.hip)  # one linked ELF
  hip --offload-arch=gfx942 "${dev[@]}" -o out/gfx942.co
  hip --offload-arch=gfx950 "${dev[@]}" -o out/gfx950.co
  hip --offload-arch=gfx942:xnack+ "${dev[@]}" -o out/gfx942-xnack.co
  hip --offload-arch=gfx942 -mcode-object-version=5 "${dev[@]}" -o out/gfx942-v5.co
'
phase compile

# 4. Reference outputs of that LLVM's own tools.
inroot bash -euo pipefail -c '
  llvm=$(cat llvm-dir)
  cd out
  for so in bundle bundle-compressed; do
    "$llvm/llvm-objcopy" --dump-section .hip_fatbin="$so.fatbin" "$so.so" /dev/null
    for arch in gfx942 gfx950; do  # the entries, for fixture.json to compare with the device-only objects
      "$llvm/clang-offload-bundler" --unbundle --type=o --input="$so.fatbin" \
        --targets="hipv4-amdgcn-amd-amdhsa--$arch" --output="../unbundled/$so-$arch.co"
    done
  done
  [[ $(head -c 24 bundle.fatbin) == __CLANG_OFFLOAD_BUNDLE__ ]] || { echo "bundle.so: .hip_fatbin is not an uncompressed bundle" >&2; exit 1; }
  [[ $(head -c 4 bundle-compressed.fatbin) == CCOB ]] || { echo "bundle-compressed.so: .hip_fatbin is not CCOB" >&2; exit 1; }
  for co in *.co; do
    [[ $(head -c 4 "$co" | od -An -tx1 | tr -d " ") == 7f454c46 ]] || { echo "$co: not ELF" >&2; exit 1; }
    "$llvm/llvm-readelf" --file-header "$co" > "readelf/${co%.co}.txt"
  done
  {
    for f in bundle.fatbin bundle-compressed.fatbin; do
      echo "## clang-offload-bundler --list --type=o --input=$f"
      "$llvm/clang-offload-bundler" --list --type=o --input="$f"
      echo
    done
    echo "## llvm-readelf --sections bundle.so"
    "$llvm/llvm-readelf" --sections bundle.so
    echo
    echo "## llvm-readelf --sections bundle-compressed.so"
    "$llvm/llvm-readelf" --sections bundle-compressed.so
  } > bundles.txt
'
phase reference

# 5. aiter's hsa/ at the pinned commit: only readelf's text is kept, the tree is removed.
mkdir -p "$root/build/aiter"
git -c safe.directory='*' --git-dir="$aiter_git" archive "$aiter_commit" hsa | tar -x -C "$root/build/aiter"
inroot bash -euo pipefail -c '
  llvm=$(cat llvm-dir)
  cd aiter
  find hsa -type f | LC_ALL=C sort > ../hsa-files
  elf=() other=()
  while IFS= read -r f; do
    if [[ $(head -c 4 "$f" | od -An -tx1 | tr -d " ") == 7f454c46 ]]; then elf+=("$f"); else other+=("$f"); fi
  done < ../hsa-files
  {
    echo "# llvm-readelf --file-header of the files under hsa/ of aiter $0 (${#elf[@]} ELF files, ${#other[@]} not ELF)"
    printf "%s\n" "${elf[@]}" | xargs -d "\n" "$llvm/llvm-readelf" --file-header
    echo
    echo "# Not ELF (no header): ${#other[@]} files"
    printf "%s\n" "${other[@]}"
  } > ../out/aiter-hsa-readelf.txt
' "$aiter_commit"
rm -rf "$root/build/aiter"
phase aiter-hsa

# 6. fixture.json: what each file is, from the files themselves (ELF headers, bundle headers) and the chroot.
hipcc_version=$(inroot hipcc --version)
llvm_dir=$(cat "$root/build/llvm-dir")
llvm_version=$(inroot "$llvm_dir/llvm-readelf" --version)
pkg_versions=$(inroot dpkg-query -W -f '${Package}=${Version}\n' hipcc libamdhip64-dev rocm-device-libs-22 \
  libamd-comgr-dev libhsa-runtime-dev clang-22 llvm-22 lld-22 libc6)
cp "$root/build/commands.txt" "$root/build/out/"
python3 - "$root/build/out" "$hipcc_version" "$llvm_dir" "$llvm_version" "$pkg_versions" "$aiter_commit" <<'EOF'
import json, pathlib, struct, sys, zlib

out, hipcc_version, llvm_dir, llvm_version, pkgs, aiter_commit = sys.argv[1:]
d = pathlib.Path(out)
commands = (d / "commands.txt").read_text().splitlines()


def cmd(name):
    return next(c[2:] for c in commands if c.endswith(" out/" + name))


def elf(b):
    abi = {2: 4, 3: 5, 4: 6}.get(b[8])  # EI_ABIVERSION of ELFOSABI_AMDGPU_HSA -> code object version
    e_machine, e_flags = struct.unpack_from("<H", b, 18)[0], struct.unpack_from("<I", b, 48)[0]
    return {"e_machine": e_machine, "e_flags": hex(e_flags), "ei_osabi": b[7], "ei_abiversion": b[8],
            "code_object_version": abi, "arch_mach": hex(e_flags & 0xff), "feature_bits": hex(e_flags & 0xf00)}


def bundle(b):  # the uncompressed clang offload bundle(s) one after another
    found, pos = [], 0
    while pos < len(b) and b.startswith(b"__CLANG_OFFLOAD_BUNDLE__", pos):
        n, entries = struct.unpack_from("<Q", b, pos + 24)[0], []
        p = pos + 32
        for _ in range(n):
            off, size, tlen = struct.unpack_from("<QQQ", b, p)
            entries.append({"id": b[p + 24:p + 24 + tlen].decode(), "offset": off, "size": size})
            p += 24 + tlen
        end = max([pos + e["offset"] + e["size"] for e in entries] + [p])
        found.append({"at": pos, "entries": entries, "end": end})
        pos = end
        while pos < len(b) and b[pos] == 0:
            pos += 1
    return found


def ccob(b):
    version, method = struct.unpack_from("<HH", b, 4)
    r = {"magic": "CCOB", "version": version, "method": {0: "zlib", 1: "zstd"}.get(method, method)}
    if version == 1:
        r["uncompressed_size"], r["hash"] = struct.unpack_from("<IQ", b, 8)
    elif version == 2:
        r["total_size"], r["uncompressed_size"], r["hash"] = struct.unpack_from("<IIQ", b, 8)
    elif version == 3:
        r["total_size"], r["uncompressed_size"], r["hash"] = struct.unpack_from("<QQQ", b, 8)
    r["hash"] = hex(r["hash"])
    return r


common = {"source": "tests/support/hip/kernel.hip", "kernels": ["saxpy", "sum_f32", "fill_u32"]}
files = []
for so, what in (("bundle.so", "HIP shared object, uncompressed offload bundle in .hip_fatbin"),
                 ("bundle-compressed.so", "HIP shared object, compressed (CCOB) offload bundle in .hip_fatbin")):
    fat = (d / so.replace(".so", ".fatbin")).read_bytes()
    entry = {"path": so, "what": what, "command": cmd(so), "size": (d / so).stat().st_size,
             "hip_fatbin": {"dump": so.replace(".so", ".fatbin"), "size": len(fat)}}
    if fat.startswith(b"CCOB"):
        entry["compression"] = ccob(fat)
    else:
        entry["compression"] = None
        entry["hip_fatbin"]["bundles"] = bundle(fat)
    entry["entries_equal_device_only"] = {  # clang-offload-bundler --unbundle of each arch == <arch>.co
        a: (d.parent / "unbundled" / f"{so[:-3]}-{a}.co").read_bytes() == (d / f"{a}.co").read_bytes()
        for a in ("gfx942", "gfx950")}
    files.append(entry)
for co, what in (("gfx942.co", "device-only code object, gfx942"), ("gfx950.co", "device-only code object, gfx950"),
                 ("gfx942-xnack.co", "device-only code object, gfx942:xnack+"),
                 ("gfx942-v5.co", "device-only code object, gfx942, code object v5")):
    b = (d / co).read_bytes()
    files.append({"path": co, "what": what, "command": cmd(co), "size": len(b), "elf": elf(b),
                  "readelf": f"readelf/{co[:-3]}.txt"})
files.append({"path": "bundles.txt", "what": "clang-offload-bundler --list of both bundles, "
              "llvm-readelf --sections of both .so"})
files.append({"path": "aiter-hsa-readelf.txt", "what": "llvm-readelf --file-header of every file under hsa/ "
              f"of aiter {aiter_commit}, then the files that are not ELF", "aiter_commit": aiter_commit})
doc = {"hipcc_version": hipcc_version, "llvm_dir": llvm_dir, "llvm_version": llvm_version,
       "packages": dict(l.split("=", 1) for l in pkgs.splitlines()), **common, "files": files}
(d / "fixture.json").write_text(json.dumps(doc, indent=2) + "\n")
EOF
rm -f "$out/DONE"
rm -rf "$out/readelf"
cp -a "$root/build/out/." "$out/"
printf '%s\n' "$inputs" > "$out/DONE"
phase metadata
awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "hip-fixture: total      %7.1f s\n", b - a}'
