//! One picture through a projector file: prints `{"seconds", "cpu_seconds", "n_tokens",
//! "n_embd"}`, the wall-clock time of `VisionEncoder::encode` alone (preprocessing, the
//! ViT and the projector; loading and reading the picture not) and the process's CPU
//! time over the same span (Linux: /proc/self/stat), and writes the rows as
//! little-endian f32 to OUT. Driven by `scripts/bench-vision` beside libmtmd.
//!
//! Usage: vision_encode PROJECTOR.gguf PICTURE.rgb THREADS OUT.f32
//! (PICTURE.rgb: width and height as little-endian u32, then the RGB bytes)

use std::time::Instant;

use llamay_engine::{DecodedImage, LoadOptions, VisionEncoder};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (projector, picture, out) = (&args[1], &args[2], &args[4]);
    let threads = args[3].parse().expect("threads");
    let opts = LoadOptions {
        n_threads: Some(threads),
        ..Default::default()
    };
    // The file is mapped: read it once so the timed run finds it in the page cache,
    // as libmtmd's copy of the weights is in memory before its timer starts.
    std::fs::read(projector).expect("projector");
    let enc = VisionEncoder::load(projector, &opts).expect("load");
    let raw = std::fs::read(picture).expect("picture");
    let side = |i: usize| u32::from_le_bytes(raw[i..i + 4].try_into().expect("header"));
    let image = DecodedImage {
        width: side(0),
        height: side(4),
        rgb: raw[8..].to_vec(),
        format: "png",
    };
    let (t0, c0) = (Instant::now(), cpu_seconds());
    let rows = enc.encode(&image).expect("encode");
    let (s, cpu) = (t0.elapsed().as_secs_f64(), cpu_seconds() - c0);
    let bytes: Vec<u8> = rows.values.iter().flat_map(|v| v.to_le_bytes()).collect();
    std::fs::write(out, bytes).expect("write rows");
    println!(
        "{{\"seconds\": {s:.4}, \"cpu_seconds\": {cpu:.2}, \"n_tokens\": {}, \"n_embd\": {}}}",
        rows.n_tokens, rows.n_embd
    );
}

/// User and system CPU seconds of this process so far (fields 14 and 15 of
/// /proc/self/stat, in clock ticks of 1/100 s); 0 where there is no /proc.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command's closing parenthesis, the 3rd being the state.
    let rest = stat.rsplit(')').next().unwrap_or("");
    let f: Vec<f64> = rest
        .split_whitespace()
        .skip(11)
        .take(2)
        .filter_map(|v| v.parse().ok())
        .collect();
    f.iter().sum::<f64>() / 100.0
}
