fn dq32(base: u32, sb: u32) {
    let i = (base >> 2u) + sb * 16u;
    for (var j = 0u; j < 16u; j++) {
        let v = unpack2x16float(w[i + j]);
        vals[2u * j] = v.x;
        vals[2u * j + 1u] = v.y;
    }
}
