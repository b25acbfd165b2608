// x[i] = scale · W[tokens[i]] for the tokens whose rows this buffer holds
// (row0 .. row0 + rows): a table split over buffers is read by one dispatch each.

struct Params {
    cols: u32,
    row_bytes: u32,
    row0: u32,
    rows: u32,
    scale: f32,
}

@group(0) @binding(1) var<storage, read> tokens: array<u32>;
@group(0) @binding(2) var<storage, read_write> x: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) g: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let tok = tokens[g.x];
    if tok < p.row0 || tok >= p.row0 + p.rows {
        return;
    }
    let base = (tok - p.row0) * p.row_bytes;
    for (var sb = li; sb < p.cols / 32u; sb += 64u) {
        dq32(base, sb);
        for (var j = 0u; j < 32u; j++) {
            x[g.x * p.cols + sb * 32u + j] = vals[j] * p.scale;
        }
    }
}
