fn dq32(base: u32, sb: u32) {
    let o = base + sb * 18u;
    let d = half_at(o);
    for (var j = 0u; j < 16u; j++) {
        let b = byte_at(o + 2u + j);
        vals[j] = (f32(b & 15u) - 8.0) * d;
        vals[j + 16u] = (f32(b >> 4u) - 8.0) * d;
    }
}
