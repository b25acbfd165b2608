//! The forward pass of every tiny reference model against llama.cpp's logits
//! (shared/ref/logits, README §6 table A) and, for the float-weight files whose
//! activations stay f32, against the float64 reference (shared/ref/exact, table C).

use llamay_engine::{BatchItem, KvType, LoadOptions, LogitsWanted, Model};
use serde_json::Value;

mod common;
use common::reference::{
    argmax, check_sequence, compare_top, ids, logits_in_steps, pairs, table_a_atol, Worst,
};

/// Files whose weights are float: the kernels keep activations in f32 for them.
fn f32_activations(stem: &str) -> bool {
    matches!(stem.rsplit('-').next().unwrap(), "F32" | "F16" | "BF16")
}

fn load(path: &std::path::Path) -> std::sync::Arc<Model> {
    Model::load(
        path,
        &LoadOptions {
            n_threads: Some(2),
            ..Default::default()
        },
    )
    .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn tiny_models_match_llama_cpp_table_a() {
    let models = llamay_testdata::tiny_models();
    assert_eq!(models.len(), 12);
    for path in &models {
        let stem = path.file_stem().unwrap().to_str().unwrap();
        let refj: Value = serde_json::from_str(
            &std::fs::read_to_string(llamay_testdata::ref_path(&format!("logits/{stem}.json")))
                .unwrap(),
        )
        .unwrap();
        let model = load(path);
        let atol = table_a_atol(stem);
        for seq in ["seq8", "seq40"] {
            for kv in [KvType::F32, KvType::F16] {
                let mut w = Worst::default();
                check_sequence(
                    &model,
                    &format!("{stem}/{seq}/{kv:?}"),
                    &refj["sequences"][seq],
                    atol,
                    kv,
                    &mut w,
                );
                println!(
                    "A {stem:22} {seq:5} kv {kv:?}: max|d| last {:.2e} top10 {:.2e} greedy {:.2e} (atol {atol:.1e}); argmax checked {}, greedy agree {}/16",
                    w.last, w.top10, w.greedy, w.checked_argmax, w.greedy_agree
                );
            }
        }
    }
}

#[test]
fn float_weight_tiny_models_match_exact_table_c() {
    let mut n = 0;
    for path in llamay_testdata::tiny_models() {
        let stem = path.file_stem().unwrap().to_str().unwrap().to_string();
        if !f32_activations(&stem) {
            continue;
        }
        n += 1;
        let refj: Value = serde_json::from_str(
            &std::fs::read_to_string(llamay_testdata::ref_path(&format!("exact/{stem}.json")))
                .unwrap(),
        )
        .unwrap();
        let model = load(&path);
        for seq in ["seq8", "seq40"] {
            let mut w = Worst::default();
            check_sequence(
                &model,
                &format!("{stem}/{seq}"),
                &refj["sequences"][seq],
                3e-3,
                KvType::F32,
                &mut w,
            );
            println!(
                "C {stem:22} {seq:5}: max|d| last {:.2e} top10 {:.2e} greedy {:.2e} (atol 3e-3)",
                w.last, w.top10, w.greedy
            );
        }
    }
    assert_eq!(n, 3, "the F32, F16 and BF16 files");
}

/// Two sequences fed together: both prompts in one step (one matrix for all tokens),
/// then each teacher-forced greedy step of both in one step. Every distribution must
/// still match llama.cpp's; a third, idle item asks for no logits.
#[test]
fn sequences_batched_in_one_step_match_the_reference() {
    for stem in ["tiny-gemma3-Q4_K", "tiny-qwen2-Q8_0", "tiny-llama-F32"] {
        let path = llamay_testdata::ref_path(&format!("tiny/{stem}.gguf"));
        let refj: Value = serde_json::from_str(
            &std::fs::read_to_string(llamay_testdata::ref_path(&format!("logits/{stem}.json")))
                .unwrap(),
        )
        .unwrap();
        let model = load(&path);
        let atol = table_a_atol(stem);
        let refs = [&refj["sequences"]["seq40"], &refj["sequences"]["seq8"]];
        let prompts: Vec<Vec<u32>> = refs.iter().map(|r| ids(&r["token_ids"])).collect();
        let greedy: Vec<Vec<u32>> = refs.iter().map(|r| ids(&r["greedy_ids"])).collect();
        let mut seqs = [model.new_sequence(), model.new_sequence()];
        let mut idle = model.new_sequence();
        let mut w = Worst::default();
        let [a, b] = &mut seqs;
        let out = model
            .forward(&mut [
                BatchItem {
                    seq: a,
                    tokens: &prompts[0],
                    want_logits: LogitsWanted::All,
                },
                BatchItem {
                    seq: &mut idle,
                    tokens: &[],
                    want_logits: LogitsWanted::Last,
                },
                BatchItem {
                    seq: b,
                    tokens: &prompts[1],
                    want_logits: LogitsWanted::All,
                },
            ])
            .unwrap();
        assert_eq!(out[1].n_rows(), 0);
        for (i, o) in [(0, &out[0]), (1, &out[2])] {
            assert_eq!(o.n_rows(), prompts[i].len());
            for (p, top) in refs[i]["top10_per_position"]
                .as_array()
                .unwrap()
                .iter()
                .enumerate()
            {
                let what = format!("{stem} batched prompt {i} pos {p}");
                w.top10 = w
                    .top10
                    .max(compare_top(o.row(p), &pairs(top), atol, &what, &mut w));
            }
        }
        for s in 1..16 {
            let [a, b] = &mut seqs;
            let out = model
                .forward(&mut [
                    BatchItem {
                        seq: a,
                        tokens: &greedy[0][s - 1..s],
                        want_logits: LogitsWanted::Last,
                    },
                    BatchItem {
                        seq: b,
                        tokens: &greedy[1][s - 1..s],
                        want_logits: LogitsWanted::Last,
                    },
                ])
                .unwrap();
            for i in 0..2 {
                let top5 = pairs(&refs[i]["greedy_steps"][s]["top5"]);
                let what = format!("{stem} batched decode {i} step {s}");
                let d = compare_top(out[i].last().unwrap(), &top5, atol, &what, &mut w);
                w.greedy = w.greedy.max(d);
            }
        }
        assert_eq!(seqs[0].len(), 40 + 15);
        assert_eq!(seqs[1].len(), 8 + 15);
        assert!(idle.is_empty());
        println!(
            "batched {stem}: max|d| prompts {:.2e} decode {:.2e} (atol {atol:.1e})",
            w.top10, w.greedy
        );
    }
}

#[test]
fn bad_inputs_are_errors_and_leave_the_sequence_unchanged() {
    let model = load(&llamay_testdata::ref_path("tiny/tiny-llama-F32.gguf"));
    let mut seq = model.new_sequence_with(KvType::F32, 10);
    let feed = |seq: &mut _, tokens: &[u32]| {
        model
            .forward(&mut [BatchItem {
                seq,
                tokens,
                want_logits: LogitsWanted::Last,
            }])
            .map(|_| ())
    };
    assert!(
        feed(&mut seq, &[1, 2, 512]).is_err(),
        "token outside the vocabulary"
    );
    assert!(seq.is_empty());
    assert!(
        feed(&mut seq, &[1; 11]).is_err(),
        "more than n_ctx positions"
    );
    assert!(seq.is_empty());
    feed(&mut seq, &[1; 10]).unwrap();
    assert_eq!(seq.len(), 10);
    assert!(feed(&mut seq, &[1]).is_err(), "context full");
    // A sequence of another model is refused.
    let other = load(&llamay_testdata::ref_path("tiny/tiny-llama-Q4_0.gguf"));
    let mut foreign = other.new_sequence();
    assert!(feed(&mut foreign, &[1]).is_err());
    seq.clear();
    assert!(seq.is_empty());
    feed(&mut seq, &[1, 2]).unwrap();
    assert_eq!(seq.len(), 2);
}

#[test]
fn model_facts_summarise_the_file() {
    let model = load(&llamay_testdata::ref_path("tiny/tiny-gemma3-Q4_K.gguf"));
    let facts = model.facts();
    assert_eq!(facts.architecture, "gemma3");
    assert_eq!(facts.name.as_deref(), Some("tiny-random-gemma3"));
    assert_eq!(facts.file_type.as_deref(), Some("Q4_K_S"));
    assert_eq!(
        (
            facts.context_length,
            facts.embedding_length,
            facts.block_count
        ),
        (Some(512), Some(256), Some(4))
    );
    assert_eq!(
        (facts.head_count, facts.head_count_kv, facts.vocab_size),
        (Some(4), Some(2), 512)
    );
    // Embedding 256×512 + 4 layers × (q 256², k and v 256×128 each, o 256², gate, up and
    // down 256×512 each, norms 4×256 + 2×64) + output norm 256.
    let per_layer = 2 * 256 * 256 + 2 * 256 * 128 + 3 * 256 * 512 + 4 * 256 + 2 * 64;
    assert_eq!(facts.parameters, (256 * 512 + 4 * per_layer + 256) as u64);
    // The file states every figure, so its header alone says the same.
    let header = llamay_engine::ModelFacts::from_gguf(model.gguf()).unwrap();
    assert_eq!(facts, &header);
    assert_eq!(model.n_vocab(), 512);
    assert_eq!(model.n_ctx_train(), 512);
}

#[test]
fn long_inputs_are_chunked_with_the_same_result() {
    use llamay_engine::MAX_STEP_TOKENS;
    let model = load(&llamay_testdata::ref_path("tiny/tiny-gemma3-Q6_K.gguf"));
    let n = MAX_STEP_TOKENS + 88;
    let tokens: Vec<u32> = (0..n).map(|i| ((i * 131 + 7) % 506) as u32).collect();
    let run = |splits: &[usize], want: LogitsWanted| {
        let mut seq = model.new_sequence_with(KvType::F32, 1024);
        let rows = logits_in_steps(&model, &mut seq, &tokens, splits, want);
        assert_eq!(seq.len(), n);
        rows
    };
    // One request of 600 tokens (chunked inside) against requests of 300 each.
    let whole = run(&[n], LogitsWanted::All);
    let halves = run(&[n / 2, n], LogitsWanted::All);
    assert_eq!(whole.len(), n * 512);
    let d = whole
        .iter()
        .zip(&halves)
        .fold(0.0f32, |m, (a, b)| m.max((a - b).abs()));
    assert!(d < 1e-3, "chunked and split runs differ by {d}");
    let last = run(&[n], LogitsWanted::Last);
    assert_eq!(last, whole[(n - 1) * 512..].to_vec());
}

#[test]
fn truncated_sequences_continue_like_fresh_ones() {
    let tokens: Vec<u32> = (0..30).map(|i| (i * 37 % 500) as u32).collect();
    let last_logits = |model: &Model, seq: &mut llamay_engine::SeqState, t: &[u32]| {
        let out = model
            .forward(&mut [BatchItem {
                seq,
                tokens: t,
                want_logits: LogitsWanted::Last,
            }])
            .unwrap();
        out[0].last().unwrap().to_vec()
    };
    // Global attention only: any prefix can be kept.
    let llama = load(&llamay_testdata::ref_path("tiny/tiny-llama-F32.gguf"));
    let mut fresh = llama.new_sequence();
    let want = last_logits(&llama, &mut fresh, &tokens[..12]);
    let mut seq = llama.new_sequence();
    last_logits(&llama, &mut seq, &tokens);
    assert!(!seq.truncate(31));
    assert!(seq.truncate(10));
    assert_eq!(seq.len(), 10);
    let got = last_logits(&llama, &mut seq, &tokens[10..12]);
    let d = want
        .iter()
        .zip(&got)
        .fold(0.0f32, |m, (a, b)| m.max((a - b).abs()));
    assert!(d < 1e-4, "{d}");
    // Sliding window 16: blocks keep every position, so a cut to 10 after 30
    // positions (past the window) continues like a fresh sequence too.
    let gemma = load(&llamay_testdata::ref_path("tiny/tiny-gemma3-Q6_K.gguf"));
    let mut seq = gemma.new_sequence();
    last_logits(&gemma, &mut seq, &tokens);
    assert!(!seq.truncate(31));
    assert!(seq.truncate(10));
    assert_eq!(seq.len(), 10);
    let got = last_logits(&gemma, &mut seq, &tokens[10..12]);
    let mut fresh = gemma.new_sequence();
    let want = last_logits(&gemma, &mut fresh, &tokens[..12]);
    let d = want
        .iter()
        .zip(&got)
        .fold(0.0f32, |m, (a, b)| m.max((a - b).abs()));
    assert!(d < 1e-3, "{d}");
}

/// Forks share their parent's blocks (no bytes copied until one writes into the
/// shared last block) and continue exactly as fresh sequences fed the same tokens:
/// Gemma 3's sliding window (16 here) included, forked past the window.
#[test]
fn forks_share_blocks_and_continue_like_fresh_sequences() {
    let tokens: Vec<u32> = (0..70).map(|i| (i * 37 % 500) as u32).collect();
    for path in ["tiny/tiny-gemma3-Q6_K.gguf", "tiny/tiny-llama-F32.gguf"] {
        let model = load(&llamay_testdata::ref_path(path));
        let mut parent = model.new_sequence();
        model
            .forward(&mut [BatchItem {
                seq: &mut parent,
                tokens: &tokens[..45],
                want_logits: LogitsWanted::None,
            }])
            .unwrap();
        let live = model.kv_bytes_live();
        assert_eq!(live, parent.blocks().len() * model.kv_block_bytes());
        let mut forks: Vec<_> = (0..3).map(|_| parent.fork()).collect();
        assert_eq!(
            model.kv_bytes_live(),
            live,
            "{path}: forking copies nothing"
        );
        // Each fork continues with its own tokens, all in one step.
        let tails: Vec<Vec<u32>> = (0..3u32).map(|f| vec![7 + f, 11 * f + 3, 99]).collect();
        let mut items: Vec<BatchItem> = forks
            .iter_mut()
            .zip(&tails)
            .map(|(seq, t)| BatchItem {
                seq,
                tokens: t,
                want_logits: LogitsWanted::Last,
            })
            .collect();
        let got = model.forward(&mut items).unwrap();
        drop(items);
        // Only the shared, partly filled last block was copied, once per fork.
        assert_eq!(
            model.kv_bytes_live(),
            live + 3 * model.kv_block_bytes(),
            "{path}"
        );
        for (f, tail) in tails.iter().enumerate() {
            let mut fresh = model.new_sequence();
            let all = [&tokens[..45], &tail[..]].concat();
            let want = model
                .forward(&mut [BatchItem {
                    seq: &mut fresh,
                    tokens: &all,
                    want_logits: LogitsWanted::Last,
                }])
                .unwrap();
            let d = want[0]
                .last()
                .unwrap()
                .iter()
                .zip(got[f].last().unwrap())
                .fold(0.0f32, |m, (a, b)| m.max((a - b).abs()));
            assert!(d < 1e-3, "{path} fork {f}: {d}");
        }
        // The parent is untouched by its forks' writes.
        let mut again = model.new_sequence();
        let a = model
            .forward(&mut [BatchItem {
                seq: &mut again,
                tokens: &tokens[..46],
                want_logits: LogitsWanted::Last,
            }])
            .unwrap();
        let b = model
            .forward(&mut [BatchItem {
                seq: &mut parent,
                tokens: &tokens[45..46],
                want_logits: LogitsWanted::Last,
            }])
            .unwrap();
        let d = a[0]
            .last()
            .unwrap()
            .iter()
            .zip(b[0].last().unwrap())
            .fold(0.0f32, |m, (x, y)| m.max((x - y).abs()));
        assert!(d < 1e-3, "{path} parent: {d}");
        // A sequence rebuilt from the blocks continues the same way.
        let rebuilt = model
            .sequence_from_blocks(parent.blocks(), parent.len())
            .unwrap();
        assert_eq!(rebuilt.len(), 46);
        assert!(model.sequence_from_blocks(parent.blocks(), 10).is_err());
    }
}

#[test]
fn models_are_shared_between_threads() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Model>();
    send_sync::<llamay_engine::SeqState>();
    let model = load(&llamay_testdata::ref_path("tiny/tiny-qwen2-Q5_0.gguf"));
    let tokens: Vec<u32> = (0..20).map(|i| (i * 13 % 500) as u32).collect();
    let run = |m: &Model| {
        let mut seq = m.new_sequence();
        let out = m
            .forward(&mut [BatchItem {
                seq: &mut seq,
                tokens: &tokens,
                want_logits: LogitsWanted::Last,
            }])
            .unwrap();
        out[0].data.clone()
    };
    let want = run(&model);
    let handles: Vec<_> = (0..3)
        .map(|_| {
            let m = std::sync::Arc::clone(&model);
            let t = tokens.clone();
            std::thread::spawn(move || {
                let mut seq = m.new_sequence();
                let out = m
                    .forward(&mut [BatchItem {
                        seq: &mut seq,
                        tokens: &t,
                        want_logits: LogitsWanted::Last,
                    }])
                    .unwrap();
                out[0].data.clone()
            })
        })
        .collect();
    for h in handles {
        assert_eq!(
            h.join().unwrap(),
            want,
            "concurrent steps give identical logits"
        );
    }
}

#[test]
fn recycled_logits_buffers_come_back_with_fresh_values() {
    let path = llamay_testdata::tiny_models().into_iter().next().unwrap();
    let model = load(&path);
    let run = |tokens: &[u32]| {
        let mut seq = model.new_sequence();
        model
            .forward(&mut [BatchItem {
                seq: &mut seq,
                tokens,
                want_logits: LogitsWanted::Last,
            }])
            .unwrap()
    };
    let first = run(&[1, 2, 3]);
    let want_other = run(&[4, 5]).remove(0).data;
    let recycled = first[0].data.as_ptr();
    model.recycle_logits(first);
    let again = run(&[4, 5]);
    // The handed-back buffer is reused, and holds this step's logits, not the old ones.
    assert_eq!(again[0].data.as_ptr(), recycled);
    assert_eq!(again[0].data, want_other);
}

#[test]
fn a_step_split_by_sequences_gives_the_logits_of_one_split_by_rows() {
    // Eight sequences (one idle) decoding together: run as one step per thread, each
    // over its own sequences, every logit is the same as in the step split by weight
    // rows, however the batch is cut.
    use llamay_engine::BatchSplit;
    for stem in ["tiny-gemma3-Q4_K", "tiny-qwen2-Q8_0", "tiny-llama-F32"] {
        let path = llamay_testdata::ref_path(&format!("tiny/{stem}.gguf"));
        let models: Vec<_> = [BatchSplit::Rows, BatchSplit::Sequences]
            .into_iter()
            .map(|split| {
                let opts = LoadOptions {
                    n_threads: Some(2),
                    kv_type: KvType::F16,
                    batch_split: split,
                    ..Default::default()
                };
                Model::load(&path, &opts).unwrap()
            })
            .collect();
        let runs: Vec<Vec<Vec<u32>>> = models
            .iter()
            .map(|model| {
                let mut seqs: Vec<_> = (0..8).map(|_| model.new_sequence()).collect();
                let mut next: Vec<u32> = (0..8).map(|i| 3 + 5 * i).collect();
                let mut bits = Vec::new();
                for step in 0..6 {
                    // Prompts of different lengths first, then one token each; the
                    // fourth sequence sits the decode steps out.
                    let prompts: Vec<Vec<u32>> = (0..8u32)
                        .map(|i| match step {
                            0 => (0..1 + i).map(|k| 2 + 7 * k + i).collect(),
                            _ if i == 3 => Vec::new(),
                            _ => vec![next[i as usize]],
                        })
                        .collect();
                    let mut batch: Vec<BatchItem> = seqs
                        .iter_mut()
                        .zip(&prompts)
                        .map(|(seq, tokens)| BatchItem {
                            seq,
                            tokens,
                            want_logits: LogitsWanted::Last,
                        })
                        .collect();
                    let out = model.forward(&mut batch).unwrap();
                    for (i, o) in out.iter().enumerate() {
                        if let Some(row) = o.last() {
                            next[i] = argmax(row) as u32;
                            bits.push(row.iter().map(|v| v.to_bits()).collect());
                        } else {
                            bits.push(Vec::new());
                        }
                    }
                }
                bits
            })
            .collect();
        assert_eq!(runs[0].len(), runs[1].len());
        let mut worst = 0.0f32;
        for (k, (a, b)) in runs[0].iter().zip(&runs[1]).enumerate() {
            assert_eq!(a.len(), b.len(), "{stem}: output {k}");
            for (x, y) in a.iter().zip(b) {
                worst = worst.max((f32::from_bits(*x) - f32::from_bits(*y)).abs());
            }
        }
        // Bit for bit on the interleaved kernels; the row-by-row kernels round a little
        // differently for tiles of different widths (2.4e-7 seen).
        println!("{stem}: worst difference between splits {worst:e}");
        assert!(
            worst <= 1e-5,
            "{stem}: logits differ between splits by {worst}"
        );
    }
}
