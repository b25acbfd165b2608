use llamay_engine::batch::{BatchItem, LogitsWanted};
use llamay_engine::model::{LoadOptions, Model};
use llamay_testdata::RealModel;
use std::time::Instant;

fn main() {
    let which = if std::env::args().nth(1).as_deref() == Some("gemma") {
        RealModel::Gemma3
    } else {
        RealModel::SmolLM2
    };
    let ctx: usize = std::env::args()
        .nth(2)
        .map(|s| s.parse().unwrap())
        .unwrap_or(100);
    let model = Model::load(
        llamay_testdata::real_model(which),
        &LoadOptions {
            n_threads: Some(
                std::env::args()
                    .nth(3)
                    .map(|s| s.parse().unwrap())
                    .unwrap_or(2),
            ),
            n_ctx: Some(2048),
            ..Default::default()
        },
    )
    .unwrap();
    let toks: Vec<u32> = (0..1024)
        .map(|i| (1000 + (i * 7919) % 29000) as u32)
        .collect();
    let bs: Vec<usize> = std::env::args()
        .nth(4)
        .map(|s| s.split(",").map(|x| x.parse().unwrap()).collect())
        .unwrap_or(vec![1, 2, 4, 8]);
    for b in bs {
        let mut seqs: Vec<_> = (0..b).map(|_| model.new_sequence()).collect();
        for s in seqs.iter_mut() {
            model
                .forward(&mut [BatchItem {
                    seq: s,
                    tokens: &toks[..ctx],
                    want_logits: LogitsWanted::Last,
                }])
                .unwrap();
        }
        let steps = 256;
        let t = Instant::now();
        let c0 = cpu_ns();
        for i in 0..steps {
            let mut items: Vec<BatchItem> = seqs
                .iter_mut()
                .enumerate()
                .map(|(j, s)| BatchItem {
                    seq: s,
                    tokens: std::slice::from_ref(&toks[ctx + i + j]),
                    want_logits: LogitsWanted::Last,
                })
                .collect();
            model.forward(&mut items).unwrap();
        }
        let per = t.elapsed().as_secs_f64() / steps as f64;
        let cpu = (cpu_ns() - c0) as f64 / 1e9 / steps as f64;
        println!("b={b} ctx={ctx}: {:.2} ms/step wall, {:.2} ms/step main-thread cpu, aggregate {:.1} tok/s wall, {:.1} tok/s by cpu", per * 1e3, cpu*1e3, b as f64 / per, b as f64/cpu);
    }
}

fn cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap()
}
