// Blocks of 20 bytes in rows of whole blocks, so every block starts on a word: the
// quants are read four bytes at a time.
fn dq32(base: u32, sb: u32) {
    let o = base + sb * 20u;
    let dm = unpack2x16float(w[o >> 2u]);
    let d = dm.x;
    let m = dm.y;
    for (var k = 0u; k < 4u; k++) {
        let q = w[(o >> 2u) + 1u + k];
        for (var i = 0u; i < 4u; i++) {
            let b = (q >> (8u * i)) & 0xFFu;
            vals[4u * k + i] = f32(b & 15u) * d + m;
            vals[4u * k + i + 16u] = f32(b >> 4u) * d + m;
        }
    }
}
