// Attention of one item's queries over its cache, one head of one token per
// workgroup: scores (soft-capped), a numerically stable softmax (probabilities
// rounded to f16 with an f16 cache, as the CPU engine and llama.cpp do), then the
// value sums. Query t of the item sits at position start + t and sees positions
// lo ..= start + t, lo set by the sliding window.

struct Params {
    n_head: u32,
    group: u32,
    hk: u32,
    hv: u32,
    kw: u32,
    vw: u32,
    qw: u32,
    ow: u32,
    row0: u32,
    start: u32,
    window: u32,
    softcap: f32,
    f16: u32,
    span: u32,
}

@group(0) @binding(0) var<storage, read> q: array<f32>;
@group(0) @binding(1) var<storage, read> kc: array<u32>;
@group(0) @binding(2) var<storage, read> vc: array<u32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;
@group(0) @binding(4) var<storage, read_write> scores: array<f32>;
@group(0) @binding(5) var<uniform> p: Params;

var<workgroup> qv: array<f32, 256>;
var<workgroup> red: array<f32, 64>;

fn cached(buf_is_k: bool, j: u32, c: u32) -> f32 {
    let width = select(p.vw, p.kw, buf_is_k);
    let at = j * width + c;
    var word: u32;
    if p.f16 == 0u {
        if buf_is_k {
            word = kc[at];
        } else {
            word = vc[at];
        }
        return bitcast<f32>(word);
    }
    if buf_is_k {
        word = kc[at / 2u];
    } else {
        word = vc[at / 2u];
    }
    let pair = unpack2x16float(word);
    return select(pair.x, pair.y, (at & 1u) != 0u);
}

fn reduce(li: u32, is_max: bool) -> f32 {
    workgroupBarrier();
    for (var s = 32u; s > 0u; s >>= 1u) {
        if li < s {
            if is_max {
                red[li] = max(red[li], red[li + s]);
            } else {
                red[li] += red[li + s];
            }
        }
        workgroupBarrier();
    }
    let r = red[0];
    workgroupBarrier();
    return r;
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) g: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let h = g.x;
    let t = g.y;
    let kvh = h / p.group;
    let pos = p.start + t;
    var lo = 0u;
    if p.window != 0u && pos + 1u > p.window {
        lo = pos + 1u - p.window;
    }
    let row = p.row0 + t;
    for (var d = li; d < p.hk; d += 64u) {
        qv[d] = q[row * p.qw + h * p.hk + d];
    }
    workgroupBarrier();
    let sbase = (t * p.n_head + h) * p.span;
    var m = -3.0e38;
    for (var j = lo + li; j <= pos; j += 64u) {
        var s = 0.0;
        for (var d = 0u; d < p.hk; d++) {
            s += qv[d] * cached(true, j, kvh * p.hk + d);
        }
        if p.softcap > 0.0 {
            s = p.softcap * tanh(s / p.softcap);
        }
        scores[sbase + j - lo] = s;
        m = max(m, s);
    }
    red[li] = m;
    let mx = reduce(li, true);
    var sum = 0.0;
    for (var j = lo + li; j <= pos; j += 64u) {
        let e = exp(scores[sbase + j - lo] - mx);
        scores[sbase + j - lo] = e;
        sum += e;
    }
    red[li] = sum;
    let inv = 1.0 / reduce(li, false);
    for (var j = lo + li; j <= pos; j += 64u) {
        var pj = scores[sbase + j - lo] * inv;
        if p.f16 != 0u {
            pj = unpack2x16float(pack2x16float(vec2<f32>(pj, 0.0))).x;
        }
        scores[sbase + j - lo] = pj;
    }
    storageBarrier();
    workgroupBarrier();
    for (var d = li; d < p.hv; d += 64u) {
        var o = 0.0;
        for (var j = lo; j <= pos; j++) {
            o += scores[sbase + j - lo] * cached(false, j, kvh * p.hv + d);
        }
        out[row * p.ow + h * p.hv + d] = o;
    }
}
