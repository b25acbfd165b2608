fn dq32(base: u32, sb: u32) {
    let o = base + sb * 34u;
    let d = half_at(o);
    for (var j = 0u; j < 32u; j++) {
        vals[j] = sbyte_at(o + 2u + j) * d;
    }
}
