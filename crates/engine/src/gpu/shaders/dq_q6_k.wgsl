// A Q6_K block's 256 elements are two halves of 128; sub-block `k` (0..3) of a half
// takes the low or high nibbles of one of two 32-byte runs of `ql` and a 2-bit pair of
// each `qh` byte.
fn dq32(base: u32, sb: u32) {
    let o = base + (sb >> 3u) * 210u;
    let n = (sb >> 2u) & 1u;
    let k = sb & 3u;
    let d = half_at(o + 208u);
    let ql = o + 64u * n + (k & 1u) * 32u;
    let qh = o + 128u + 32u * n;
    let nib = (k >> 1u) * 4u;
    let hs = k * 2u;
    for (var l = 0u; l < 32u; l++) {
        let q = ((byte_at(ql + l) >> nib) & 15u) | (((byte_at(qh + l) >> hs) & 3u) << 4u);
        let sc = sbyte_at(o + 192u + 8u * n + (l >> 4u) + 2u * k);
        vals[l] = d * sc * (f32(q) - 32.0);
    }
}
