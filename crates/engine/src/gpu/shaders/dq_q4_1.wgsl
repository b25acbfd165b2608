fn dq32(base: u32, sb: u32) {
    let o = base + sb * 20u;
    let d = half_at(o);
    let m = half_at(o + 2u);
    for (var j = 0u; j < 16u; j++) {
        let b = byte_at(o + 4u + j);
        vals[j] = f32(b & 15u) * d + m;
        vals[j + 16u] = f32(b >> 4u) * d + m;
    }
}
