//! Compiles the AVX2 kernels a second time for CPUs with AVX-512 VNNI: the same source
//! with a wider `target_feature` set (32 vector registers, `vpdpbusd`/`vpdpwssd` dot
//! products) and `VNNI` switched on. Generating the copy keeps one source of truth.

use std::{env, fs, path::PathBuf};

/// Each AVX2 source and the file its AVX-512 copy is written to.
const SOURCES: [(&str, &str); 5] = [
    ("src/quant/kernels/avx2_groups.rs", "avx512_vnni_groups.rs"),
    ("src/quant/kernels/avx2.rs", "avx512_vnni.rs"),
    ("src/quant/kernels/avx2_acts.rs", "avx512_vnni_acts.rs"),
    ("src/quant/kernels/avx2_wide.rs", "avx512_vnni_wide.rs"),
    ("src/quant/kernels/avx2_table.rs", "avx512_vnni_table.rs"),
];
/// The table names the kernels but compiles none: it has no target features.
const TABLE: &str = "src/quant/kernels/avx2_table.rs";
const AVX2: &str = "\"avx2,fma,f16c\"";
const AVX512_VNNI: &str = "\"avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni\"";

fn main() {
    let out_dir = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    for (source, copy) in SOURCES {
        println!("cargo:rerun-if-changed={source}");
        let src = fs::read_to_string(source).expect("kernel source readable");
        assert!(
            source == TABLE || src.contains(AVX2),
            "{source} no longer names its target features as {AVX2}"
        );
        let out: String = src
            .lines()
            // Inner doc comments cannot appear in an `include!`d file.
            .filter(|l| !l.starts_with("//!"))
            .map(|l| {
                l.replace(AVX2, AVX512_VNNI)
                    .replace("const VNNI: bool = false;", "const VNNI: bool = true;")
                    .replace("KernelSet::Avx2", "KernelSet::Avx512Vnni")
                    // Sibling modules: avx2 -> avx512_vnni, avx2_acts -> avx512_vnni_acts...
                    .replace("super::avx2", "super::avx512_vnni")
                    + "\n"
            })
            .collect();
        if src.contains("const VNNI: bool = false;") {
            assert!(
                out.contains("const VNNI: bool = true;"),
                "{source} lost its VNNI switch"
            );
        }
        fs::write(out_dir.join(copy), out).expect("OUT_DIR writable");
    }
}
