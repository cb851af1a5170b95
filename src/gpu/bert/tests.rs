//! Each kernel of `bert.wgsl` against the CPU's own code (`embed::kernels`, the packed forward's
//! stages), and the whole forward against the packed forward at f32 and the vectors
//! sentence-transformers computed (`tests/data/golden/minilm.json`), on the test device
//! (Mesa's software Vulkan in CI).

use super::*;
use crate::embed::kernels::{self, Isa, Packed};
use crate::embed::{EmbedConfig, Embedder, Forward, Precision, cosine};
use crate::gpu::test_gpu;

/// Values in [−1, 1] from `seed`, `n` of them.
fn values(n: usize, seed: u64) -> Vec<f32> {
    (0..n).map(|i| (((i as u64 * 2654435761 + seed * 40503) % 2001) as f32 - 1000.0) / 1000.0).collect()
}

/// One dispatch of `entry` over `groups` workgroups with `params`, the word pieces `pieces` and
/// the inputs `a`, `b`, `c`; `out` starts as given and is read back.
#[allow(clippy::too_many_arguments)]
fn dispatch(
    gpu: &Gpu,
    entry: &'static str,
    params: BertParams,
    pieces: &[u32],
    [a, b, c]: [&[f32]; 3],
    out: &[f32],
    groups: (u32, u32),
) -> Vec<f32> {
    let buffers: Vec<wgpu::Buffer> = [a, b, c].iter().map(|v| gpu.upload("input", v).expect("upload")).collect();
    let (uniform, meta) = (gpu.uniform("params", &params), gpu.upload("pieces", pieces).expect("upload"));
    let target = gpu.upload("out", out).expect("upload");
    let scopes = gpu.scopes();
    let (device, registry) = (gpu.device(), gpu.registry());
    let mut encoder = gpu.encoder();
    {
        let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor { label: None, timestamp_writes: None });
        pass.set_pipeline(&registry.pipeline(device, Family::Bert, entry));
        let bound = [&uniform, &meta, &buffers[0], &buffers[1], &buffers[2], &target];
        pass.set_bind_group(0, &registry.bind(device, Family::Bert, &bound), &[]);
        pass.dispatch_workgroups(groups.0, groups.1, 1);
    }
    let words = gpu.finish(encoder, &[(&target, (out.len() * 4) as u64)], scopes, None).expect("dispatch");
    words[0].iter().map(|w| f32::from_bits(*w)).collect()
}

/// The largest difference of two equally long vectors.
fn worst(gpu: &[f32], cpu: &[f32]) -> f32 {
    assert_eq!(gpu.len(), cpu.len());
    assert!(gpu.iter().all(|v| v.is_finite()), "a value is not finite");
    gpu.iter().zip(cpu).map(|(g, c)| (g - c).abs()).fold(0.0, f32::max)
}

/// Word pieces of texts of `lengths` laid end to end: (id, position, text) each, then the
/// texts' first pieces and the end.
fn pieces_of(lengths: &[usize], vocabulary: u32) -> Vec<u32> {
    let (mut pieces, mut firsts) = (Vec::new(), Vec::new());
    for (t, &n) in lengths.iter().enumerate() {
        firsts.push((pieces.len() / 3) as u32);
        for p in 0..n {
            pieces.extend([((t * 31 + p * 7) as u32) % vocabulary, p as u32, t as u32]);
        }
    }
    firsts.push((pieces.len() / 3) as u32);
    pieces.extend(firsts);
    pieces
}

const H: usize = EMBEDDING_DIM;

fn base(rows: usize, texts: usize) -> BertParams {
    BertParams {
        rows: rows as u32,
        texts: texts as u32,
        heads: 12,
        head_dim: 32,
        hidden: H as u32,
        eps: 1e-12,
        scale: 1.0 / 32f32.sqrt(),
        ..Default::default()
    }
}

#[test]
fn the_product_matches_the_packed_product_with_and_without_gelu() {
    let Some(gpu) = test_gpu() else { return };
    // Rows, outputs and inputs that are not whole tiles (64, 64, 16) test every edge.
    let (rows, n, k) = (70, 144, 40);
    let (x, w, bias) = (values(rows * k, 1), values(n * k, 2), values(n, 3));
    let packed = Packed::new(&w, &bias, n, k).expect("whole panels");
    let mut cpu = vec![0.0; rows * n];
    packed.apply(Isa::detect(), &x, rows, &mut cpu);
    for gelu in [false, true] {
        let params = BertParams { inputs: k as u32, outputs: n as u32, flags: u32::from(gelu), ..base(rows, 1) };
        let groups = ((n as u32).div_ceil(BERT_TILE), (rows as u32).div_ceil(BERT_TILE));
        let got = dispatch(&gpu, "linear", params, &[0], [&x, &w, &bias], &vec![0.0; rows * n], groups);
        let mut want = cpu.clone();
        if gelu {
            kernels::gelu(&mut want);
        }
        let d = worst(&got, &want);
        assert!(d < 1e-4, "gelu {gelu}: differs by {d}");
    }
}

#[test]
fn embeddings_and_the_residual_norm_match_the_cpu() {
    let Some(gpu) = test_gpu() else { return };
    let lengths = [3, 9];
    let rows: usize = lengths.iter().sum();
    let (vocab, positions) = (50u32, 16);
    let pieces = pieces_of(&lengths, vocab);
    let (words, pos) = (values(vocab as usize * H, 4), values(positions * H, 5));
    let (segment, gamma, beta) = (values(H, 6), values(H, 7), values(H, 8));
    let norm = [&segment[..], &gamma, &beta].concat();
    let got = dispatch(
        &gpu,
        "embed_tokens",
        base(rows, 2),
        &pieces,
        [&words, &pos, &norm],
        &vec![0.0; rows * H],
        (rows as u32, 1),
    );
    let mut want = vec![0.0; rows * H];
    for r in 0..rows {
        let (id, p) = (pieces[3 * r] as usize, pieces[3 * r + 1] as usize);
        for j in 0..H {
            want[r * H + j] = words[id * H + j] + segment[j] + pos[p * H + j];
        }
    }
    kernels::add_and_normalise(&mut want, None, H, &gamma, &beta, 1e-12);
    let d = worst(&got, &want);
    assert!(d < 1e-4, "embeddings differ by {d}");

    let (x, y) = (values(rows * H, 9), values(rows * H, 10));
    let gamma_beta = [&gamma[..], &beta].concat();
    let got = dispatch(&gpu, "add_norm", base(rows, 2), &pieces, [&y, &[0.0], &gamma_beta], &x, (rows as u32, 1));
    let mut want = x.clone();
    kernels::add_and_normalise(&mut want, Some(&y), H, &gamma, &beta, 1e-12);
    let d = worst(&got, &want);
    assert!(d < 1e-4, "residual norm differs by {d}");
}

#[test]
fn attention_and_pooling_stay_within_each_text() {
    let Some(gpu) = test_gpu() else { return };
    // A text of one piece, a short one, and one longer than attention's 64 threads.
    let lengths = [1, 5, 130];
    let rows: usize = lengths.iter().sum();
    let pieces = pieces_of(&lengths, 100);
    let firsts = &pieces[3 * rows..];
    let qkv: Vec<f32> = values(rows * 3 * H, 11).iter().map(|v| 3.0 * v).collect();
    let got = dispatch(
        &gpu,
        "attention",
        base(rows, 3),
        &pieces,
        [&qkv, &[0.0], &[0.0]],
        &vec![0.0; rows * H],
        (rows as u32, 12),
    );
    // The packed forward's attention, written plainly: softmax of scaled scores over the
    // piece's own text, then the weighted values.
    let (d, scale) = (32, 1.0 / 32f64.sqrt());
    let mut want = vec![0.0; rows * H];
    for t in 0..lengths.len() {
        let (from, to) = (firsts[t] as usize, firsts[t + 1] as usize);
        for r in from..to {
            for head in 0..12 {
                let q = |e: usize| f64::from(qkv[r * 3 * H + head * d + e]);
                let scores: Vec<f64> = (from..to)
                    .map(|j| (0..d).map(|e| q(e) * f64::from(qkv[j * 3 * H + H + head * d + e])).sum::<f64>() * scale)
                    .collect();
                let top = scores.iter().copied().fold(f64::MIN, f64::max);
                let exps: Vec<f64> = scores.iter().map(|s| (s - top).exp()).collect();
                let total: f64 = exps.iter().sum();
                for e in 0..d {
                    let v: f64 =
                        (from..to).zip(&exps).map(|(j, p)| p * f64::from(qkv[j * 3 * H + 2 * H + head * d + e])).sum();
                    want[r * H + head * d + e] = (v / total) as f32;
                }
            }
        }
    }
    let diff = worst(&got, &want);
    assert!(diff < 1e-4, "attention differs by {diff}");

    let x = values(rows * H, 12);
    let got = dispatch(&gpu, "pool", base(rows, 3), &pieces, [&x, &[0.0], &[0.0]], &vec![0.0; 3 * H], (3, 1));
    for t in 0..3 {
        let (from, to) = (firsts[t] as usize, firsts[t + 1] as usize);
        let mean: Vec<f64> =
            (0..H).map(|j| (from..to).map(|r| f64::from(x[r * H + j])).sum::<f64>() / (to - from) as f64).collect();
        let norm = mean.iter().map(|v| v * v).sum::<f64>().sqrt();
        let want: Vec<f32> = mean.iter().map(|v| (v / norm) as f32).collect();
        let diff = worst(&got[t * H..(t + 1) * H], &want);
        assert!(diff < 1e-5, "text {t}: pooled differs by {diff}");
    }
}

#[derive(serde::Deserialize)]
struct Golden {
    sentences: Vec<GoldenSentence>,
}

#[derive(serde::Deserialize)]
struct GoldenSentence {
    text: String,
    embedding: Vec<f32>,
}

#[test]
fn the_forward_matches_the_packed_forward_and_sentence_transformers() {
    let Some(gpu) = test_gpu() else { return };
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/golden/minilm.json");
    let golden: Golden = serde_json::from_str(&std::fs::read_to_string(&path).expect("golden file")).expect("parses");
    let texts: Vec<&str> = golden.sentences.iter().map(|s| s.text.as_str()).collect();
    let config = EmbedConfig { forward: Forward::Packed, precision: Precision::F32, ..EmbedConfig::default() };
    let mut embedder = Embedder::load(&config).expect("model (scripts/fetch-model.sh)");
    let cpu = embedder.embed(&texts).expect("cpu");
    let mut bert = GpuBert::load(&gpu, embedder.model_dir()).expect("upload");
    // Small submits, so that the golden texts take several.
    bert.chunk_pieces = 64;
    let bert = std::sync::Arc::new(bert);
    embedder.accelerate(bert.clone(), 2);
    let got = embedder.embed(&texts).expect("gpu");
    assert_eq!(embedder.backend(), "gpu+cpu", "the first call ran on the CPU, the second on the device");
    let d = worst(&got, &cpu);
    assert!(d < 1e-4, "the GPU forward differs from the packed forward by {d}");
    let mut least = f32::INFINITY;
    for (i, s) in golden.sentences.iter().enumerate() {
        let c = cosine(&got[i * H..(i + 1) * H], &s.embedding);
        assert!(c >= 0.9999, "{:?}: cosine {c} with sentence-transformers", s.text);
        least = least.min(c);
    }
    eprintln!(
        "{} golden texts: at most {d:e} from the packed forward, cosine at least {least} with sentence-transformers",
        texts.len()
    );
    // One text stays on the CPU (under min_texts); the device gives it the same vector.
    let one = embedder.embed(&texts[..1]).expect("one");
    let d = worst(&bert.embed(&[&embed_ids(&embedder, texts[0])]).expect("device"), &one);
    assert!(d < 1e-4, "a lone text differs by {d}");
}

/// The word pieces `embedder` makes of `text`.
fn embed_ids(embedder: &Embedder, text: &str) -> Vec<u32> {
    embedder.word_piece_ids(text).expect("tokenise")
}

#[test]
fn bad_word_pieces_are_refused_by_name() {
    let Some(gpu) = test_gpu() else { return };
    let dir = crate::embed::locate_model(None).expect("model");
    let bert = GpuBert::load(&gpu, &dir).expect("upload");
    let long = vec![101u32; 600];
    let err = bert.embed(&[&[101, 102], &long]).expect_err("too long").to_string();
    assert!(err.contains("600 word pieces"), "{err}");
    let err = bert.embed(&[&[101, 999_999, 102]]).expect_err("outside").to_string();
    assert!(err.contains("999999") && err.contains("vocabulary"), "{err}");
    assert!(bert.embed(&[&[]]).is_err(), "an empty text");
}
