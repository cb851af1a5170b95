//! The int8 products of the packed forward (`embed.precision = int8`). A linear layer's weights
//! are rounded once at load to 8 bits per output (symmetric, the output's largest weight at
//! ±127), packed into panels of [`PANEL`] outputs by groups of four inputs (the 64 bytes one
//! AVX-512 VNNI `vpdpbusd` multiplies); each product's input rows are rounded as they come, to 8
//! bits per row over the row's own range ([`Rows`]: 256 steps from its least to its largest
//! value, zero one of them; twice the resolution of a symmetric rounding for the one-sided
//! rows GELU gives). The sums are whole numbers, exact in every kernel (AVX-512 VNNI, AVX2,
//! portable; the CPU's features picking one through `crate::simd`), and are scaled back to f32
//! the same way in each, so the kernels agree to the bit. Owns the precision setting
//! ([`Precision`]), quantising and the int8 kernels; must not know the model.

use super::kernels::{self, PANEL};
use crate::simd;

/// The arithmetic of the packed forward's linear layers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    /// f32 weights and inputs: the model's own function (to 1e-5).
    F32,
    /// Weights rounded to 8 bits per output once at load, each product's input rows to 8 bits
    /// per row over the row's range as they come, the sums exact in 32 bits (AVX-512 VNNI where
    /// the CPU has it): a quarter of the weight bytes and about twice f32's speed, close to but
    /// not the model's function (cosine ≥ 0.99 against sentence-transformers on every golden
    /// text; every mode's recall@10 on LoCoMo and BEAM within 0.5 points of f32's: docs/ingest.md,
    /// "Embeddings").
    #[default]
    Int8,
}

impl Precision {
    /// Its name in the config and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Precision::F32 => "f32",
            Precision::Int8 => "int8",
        }
    }
}

/// Inputs per group: the bytes one 32-bit lane of `vpdpbusd` multiplies.
const GROUP: usize = 4;

/// The largest magnitude a rounded weight takes (−127..=127: symmetric, so that the AVX2
/// kernel's pairwise sums of products stay within 16 bits).
const LEVELS: f32 = 127.0;

/// The steps of a rounded input row: a byte 0..=255, the row's zero at its zero point.
const STEPS: f32 = 255.0;

/// What the AVX2 kernel subtracts from each input byte to make it signed (−128..=127).
const OFFSET: i32 = 128;

/// The instruction set an int8 kernel uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Isa {
    /// AVX-512 with VNNI: 64 products a cycle a register.
    Vnni,
    /// AVX2: `vpmaddubsw` then `vpmaddwd`.
    Avx2,
    Portable,
}

impl Isa {
    /// The fastest this CPU runs ([`simd::best`]).
    pub(super) fn detect() -> Isa {
        simd::best()
    }
}

impl simd::Family for Isa {
    const PORTABLE: Isa = Isa::Portable;
    const ACCELERATED: &'static [Isa] = &[Isa::Vnni, Isa::Avx2];

    fn runs_on(self, cpu: &simd::Features) -> bool {
        match self {
            Isa::Vnni => cpu.avx512f && cpu.avx512bw && cpu.avx512vnni,
            Isa::Avx2 => cpu.avx2,
            Isa::Portable => true,
        }
    }
}

/// Rows of a product's input rounded to 8 bits: each row its own step and zero point, a value
/// being `(byte − zero) · step`.
#[derive(Debug, Default)]
pub(super) struct Rows {
    /// `rows × padded` bytes; padding (whose weights are 0) holds [`OFFSET`].
    bytes: Vec<u8>,
    /// Per row, the value of one step (its range / 255; 0 for a row of zeros).
    scale: Vec<f32>,
    /// Per row, the byte that stands for 0.
    zero: Vec<i32>,
    /// Inputs per row, padded to whole groups.
    padded: usize,
    rows: usize,
}

impl Rows {
    /// Rounds `x` (`rows × k`, row-major) into these buffers.
    pub(super) fn quantise(&mut self, x: &[f32], rows: usize, k: usize) {
        let padded = k.next_multiple_of(GROUP);
        self.bytes.clear();
        self.bytes.resize(rows * padded, OFFSET as u8);
        self.scale.clear();
        self.scale.resize(rows, 0.0);
        self.zero.clear();
        self.zero.resize(rows, 0);
        (self.padded, self.rows) = (padded, rows);
        for r in 0..rows {
            (self.scale[r], self.zero[r]) =
                quantise_row(&x[r * k..(r + 1) * k], &mut self.bytes[r * padded..r * padded + k]);
        }
    }
}

/// Rounds one row into `out`: its range (zero included) in [`STEPS`] steps. Returns the step and
/// the zero point.
#[multiversion::multiversion(targets("x86_64+avx512f+avx512vl+avx512bw", "x86_64+avx2+fma"))]
fn quantise_row(x: &[f32], out: &mut [u8]) -> (f32, i32) {
    let (lo, hi) = kernels::lane_range(x);
    let (lo, hi) = (lo.min(0.0), hi.max(0.0));
    if hi == lo {
        out.fill(OFFSET as u8);
        return (0.0, OFFSET);
    }
    let inv = STEPS / (hi - lo);
    let zero = (-lo * inv).round_ties_even();
    for (o, v) in out.iter_mut().zip(x) {
        let step = ((v * inv).round_ties_even() + zero).clamp(0.0, STEPS);
        // The whole number 0..=255 from its bits (+ 1.5·2^23 puts it in the low mantissa bits),
        // not through a saturating float-to-integer cast, which keeps the loop from vectorising.
        *o = ((step + 12_582_912.0).to_bits() & 0xFF) as u8;
    }
    ((hi - lo) / STEPS, zero as i32)
}

/// A linear layer with int8 weights: `n` outputs of `k` inputs.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Quantised {
    /// Panel p, group g: for each of its 16 outputs, the group's four weights: `[p][g][j][4]`.
    panels: Vec<i8>,
    /// Per output, the value of one step of its weights.
    scale: Vec<f32>,
    /// Per output, the sum of its rounded weights (what an input row's zero point adds to a sum).
    sums: Vec<i32>,
    bias: Vec<f32>,
    k: usize,
    /// `k` padded to whole groups.
    padded: usize,
    n: usize,
}

impl Quantised {
    /// Rounds and packs `weight` (`n × k`, row-major: PyTorch's `Linear.weight`) and `bias`
    /// (`n`). `n` must be a multiple of [`PANEL`].
    pub(super) fn new(weight: &[f32], bias: &[f32], n: usize, k: usize) -> Option<Quantised> {
        if !n.is_multiple_of(PANEL) || weight.len() != n * k || bias.len() != n {
            return None;
        }
        let padded = k.next_multiple_of(GROUP);
        let mut rounded = vec![0i8; n * padded];
        let mut scale = vec![0f32; n];
        let mut sums = vec![0i32; n];
        for o in 0..n {
            let row = &weight[o * k..(o + 1) * k];
            let max = row.iter().fold(0f32, |m, v| m.max(v.abs()));
            if max == 0.0 {
                continue;
            }
            scale[o] = max / LEVELS;
            let inv = LEVELS / max;
            for (i, v) in row.iter().enumerate() {
                let q = (v * inv).round_ties_even().clamp(-LEVELS, LEVELS) as i8;
                rounded[o * padded + i] = q;
                sums[o] += i32::from(q);
            }
        }
        let groups = padded / GROUP;
        let mut panels = vec![0i8; n * padded];
        for p in 0..n / PANEL {
            for g in 0..groups {
                for j in 0..PANEL {
                    for b in 0..GROUP {
                        panels[((p * groups + g) * PANEL + j) * GROUP + b] =
                            rounded[(p * PANEL + j) * padded + g * GROUP + b];
                    }
                }
            }
        }
        Some(Quantised { panels, scale, sums, bias: bias.to_vec(), k, padded, n })
    }

    /// Inputs.
    pub(super) fn inputs(&self) -> usize {
        self.k
    }

    /// Outputs.
    pub(super) fn outputs(&self) -> usize {
        self.n
    }

    /// `out[r] = x[r] · Wᵀ + b` for every row r of `x`, rounded ([`Rows`] of `k` inputs); `out`
    /// is `rows × n`.
    pub(super) fn apply(&self, isa: Isa, x: &Rows, out: &mut [f32]) {
        self.check(x, out);
        // SAFETY: `check` bounds every row of `x` and `out`; one caller writes all panels.
        unsafe { self.apply_panels(isa, x, out.as_mut_ptr(), 0..self.n / PANEL) }
    }

    /// [`Quantised::apply`] with the panels split in two halves, one on the calling thread and
    /// one on another of the current rayon pool.
    pub(super) fn apply_on_two(&self, isa: Isa, x: &Rows, out: &mut [f32]) {
        self.check(x, out);
        // SAFETY: `check` bounds every row of `x` and `out`; each half writes only its panels'
        // columns.
        kernels::on_two(self.n / PANEL, out, |o, panels| unsafe { self.apply_panels(isa, x, o, panels) });
    }

    fn check(&self, x: &Rows, out: &[f32]) {
        assert!(
            x.padded == self.padded && x.bytes.len() == x.rows * x.padded && out.len() >= x.rows * self.n,
            "matrix sizes"
        );
    }

    /// The product's columns of `panels` into `out` (`x.rows × n`).
    ///
    /// # Safety
    /// `out` points to `x.rows × n` values, `x` has this layer's padded width, and no other
    /// thread writes the columns of `panels` meanwhile.
    unsafe fn apply_panels(&self, isa: Isa, x: &Rows, out: *mut f32, panels: std::ops::Range<usize>) {
        match isa {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `isa` came from `simd::best` or `simd::available`, which offer a kernel
            // only where `simd::features` found the CPU features it is compiled for
            // (`Isa::runs_on`); the caller bounds every index.
            Isa::Vnni => unsafe { x86::apply_vnni(self, x, out, panels) },
            #[cfg(target_arch = "x86_64")]
            // SAFETY: as above.
            Isa::Avx2 => unsafe { x86::apply_avx2(self, x, out, panels) },
            // SAFETY: as above.
            _ => unsafe { self.apply_portable(x, out, panels) },
        }
    }

    /// The value of output `o` of row `r` from its exact sum Σ (byte − zero) · weight (the same
    /// rounding in every kernel: one product of the two steps, then one fused multiply-add).
    #[inline(always)]
    fn finish(&self, sum: i32, row_scale: f32, o: usize) -> f32 {
        (sum as f32).mul_add(row_scale * self.scale[o], self.bias[o])
    }

    unsafe fn apply_portable(&self, x: &Rows, out: *mut f32, panels: std::ops::Range<usize>) {
        let groups = self.padded / GROUP;
        for p in panels {
            let panel = &self.panels[p * groups * PANEL * GROUP..(p + 1) * groups * PANEL * GROUP];
            for r in 0..x.rows {
                let xr = &x.bytes[r * x.padded..(r + 1) * x.padded];
                let zero = x.zero[r];
                let mut acc = [0i32; PANEL];
                for g in 0..groups {
                    let w = &panel[g * PANEL * GROUP..(g + 1) * PANEL * GROUP];
                    let xs = &xr[g * GROUP..(g + 1) * GROUP];
                    for (j, a) in acc.iter_mut().enumerate() {
                        for b in 0..GROUP {
                            *a += (i32::from(xs[b]) - zero) * i32::from(w[j * GROUP + b]);
                        }
                    }
                }
                for (j, &a) in acc.iter().enumerate() {
                    let o = p * PANEL + j;
                    // SAFETY: the caller bounds `out` to `rows × n`.
                    unsafe { *out.add(r * self.n + o) = self.finish(a, x.scale[r], o) };
                }
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;
    use std::ops::Range;

    use crate::embed::int8::{GROUP, OFFSET, PANEL, Quantised, Rows};

    /// Rows of a tile: 12 rows × two panels of sums fill 24 of AVX-512's 32 registers (a
    /// feed-forward's 1,536 inputs × two panels are 48 KB of weights, streamed from L2 once
    /// per tile).
    const ROWS: usize = 12;

    /// Rows of an AVX2 tile: 6 rows × two registers of sums, of its 16 registers.
    const AVX2_ROWS: usize = 6;

    /// The sums of a tile scaled back to f32 and stored: `acc` holds, per row, the panel's 16
    /// sums Σ byte · weight, from which each row's zero point times the weights' sums is taken.
    ///
    /// # Safety
    /// As the kernels': `out` holds `x.rows × n`, `p` is a panel, `r + m ≤ x.rows`.
    #[target_feature(enable = "avx512f")]
    unsafe fn store_avx512(w: &Quantised, x: &Rows, acc: &[__m512i], r: usize, p: usize, out: *mut f32) {
        // SAFETY: the caller bounds `p`, the rows and `out`.
        unsafe {
            let at = p * PANEL;
            let scale = _mm512_loadu_ps(w.scale.as_ptr().add(at));
            let bias = _mm512_loadu_ps(w.bias.as_ptr().add(at));
            let sums = _mm512_loadu_si512(w.sums.as_ptr().add(at).cast());
            for (t, a) in acc.iter().enumerate() {
                let sum = _mm512_sub_epi32(*a, _mm512_mullo_epi32(sums, _mm512_set1_epi32(x.zero[r + t])));
                let step = _mm512_mul_ps(_mm512_set1_ps(x.scale[r + t]), scale);
                let v = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), step, bias);
                _mm512_storeu_ps(out.add((r + t) * w.n + at), v);
            }
        }
    }

    /// AVX-512 VNNI: a tile is up to [`ROWS`] rows × two panels, one register of 16 sums per
    /// row and panel; each step multiplies a row's four bytes (broadcast) by 16 outputs' four
    /// weights.
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    pub(super) unsafe fn apply_vnni(w: &Quantised, x: &Rows, out: *mut f32, panels: Range<usize>) {
        // SAFETY: the caller checked the CPU features and the sizes; every pointer below stays
        // inside the panels, `x` or `out`.
        unsafe {
            let groups = w.padded / GROUP;
            let (xp, wp) = (x.bytes.as_ptr(), w.panels.as_ptr());
            let stride = groups * PANEL * GROUP;
            let mut p = panels.start;
            while p < panels.end {
                let two = p + 1 < panels.end;
                let (w0, w1) = (wp.add(p * stride), wp.add((p + usize::from(two)) * stride));
                let mut r = 0;
                while r < x.rows {
                    let m = (x.rows - r).min(ROWS);
                    let mut acc0 = [_mm512_setzero_si512(); ROWS];
                    let mut acc1 = [_mm512_setzero_si512(); ROWS];
                    for g in 0..groups {
                        let a = _mm512_loadu_si512(w0.add(g * PANEL * GROUP).cast());
                        let b = _mm512_loadu_si512(w1.add(g * PANEL * GROUP).cast());
                        macro_rules! row {
                            ($t:literal) => {
                                if $t < m {
                                    let v = _mm512_set1_epi32(
                                        xp.add((r + $t) * x.padded + g * GROUP).cast::<i32>().read_unaligned(),
                                    );
                                    acc0[$t] = _mm512_dpbusd_epi32(acc0[$t], v, a);
                                    acc1[$t] = _mm512_dpbusd_epi32(acc1[$t], v, b);
                                }
                            };
                        }
                        row!(0);
                        row!(1);
                        row!(2);
                        row!(3);
                        row!(4);
                        row!(5);
                        row!(6);
                        row!(7);
                        row!(8);
                        row!(9);
                        row!(10);
                        row!(11);
                    }
                    store_avx512(w, x, &acc0[..m], r, p, out);
                    if two {
                        store_avx512(w, x, &acc1[..m], r, p + 1, out);
                    }
                    r += m;
                }
                p += 2;
            }
        }
    }

    /// AVX2: a tile is up to [`AVX2_ROWS`] rows × one panel, two registers of 8 sums per row. Each
    /// step makes a row's four bytes signed (byte − [`OFFSET`]), multiplies their magnitudes by
    /// the weights carrying their signs (`vpmaddubsw`: pairs of products, at most 2·128·127 in
    /// 16 bits) and adds the pairs (`vpmaddwd`); the offset, less the zero point, times the
    /// weights' sums is added back at the end.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn apply_avx2(w: &Quantised, x: &Rows, out: *mut f32, panels: Range<usize>) {
        // SAFETY: the caller checked the CPU features and the sizes; every pointer below stays
        // inside the panels, the scales, the bias, `x` or `out`.
        unsafe {
            let groups = w.padded / GROUP;
            let (xp, wp) = (x.bytes.as_ptr(), w.panels.as_ptr());
            let stride = groups * PANEL * GROUP;
            let (flip, ones) = (_mm256_set1_epi8(OFFSET as u8 as i8), _mm256_set1_epi16(1));
            for p in panels {
                let w0 = wp.add(p * stride);
                let mut r = 0;
                while r < x.rows {
                    let m = (x.rows - r).min(AVX2_ROWS);
                    let mut lo = [_mm256_setzero_si256(); AVX2_ROWS];
                    let mut hi = [_mm256_setzero_si256(); AVX2_ROWS];
                    for g in 0..groups {
                        let a = _mm256_loadu_si256(w0.add(g * PANEL * GROUP).cast());
                        let b = _mm256_loadu_si256(w0.add(g * PANEL * GROUP + 32).cast());
                        for t in 0..m {
                            let u = xp.add((r + t) * x.padded + g * GROUP).cast::<i32>().read_unaligned();
                            let v = _mm256_xor_si256(_mm256_set1_epi32(u), flip);
                            let mag = _mm256_sign_epi8(v, v);
                            let pa = _mm256_maddubs_epi16(mag, _mm256_sign_epi8(a, v));
                            let pb = _mm256_maddubs_epi16(mag, _mm256_sign_epi8(b, v));
                            lo[t] = _mm256_add_epi32(lo[t], _mm256_madd_epi16(pa, ones));
                            hi[t] = _mm256_add_epi32(hi[t], _mm256_madd_epi16(pb, ones));
                        }
                    }
                    let at = p * PANEL;
                    for t in 0..m {
                        for (half, sums) in [lo[t], hi[t]].into_iter().enumerate() {
                            let mut s = [0i32; 8];
                            _mm256_storeu_si256(s.as_mut_ptr().cast(), sums);
                            for (j, &v) in s.iter().enumerate() {
                                let o = at + half * 8 + j;
                                let sum = v + (OFFSET - x.zero[r + t]) * w.sums[o];
                                *out.add((r + t) * w.n + o) = w.finish(sum, x.scale[r + t], o);
                            }
                        }
                    }
                    r += m;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// The product the rounding defines, in i64 and f64: every weight and input at its step.
    fn reference(w: &Quantised, x: &Rows) -> Vec<f64> {
        let groups = w.padded / GROUP;
        let mut out = vec![0f64; x.rows * w.n];
        for r in 0..x.rows {
            for o in 0..w.n {
                let (p, j) = (o / PANEL, o % PANEL);
                let mut sum = 0i64;
                for i in 0..w.padded {
                    let (g, b) = (i / GROUP, i % GROUP);
                    let q = w.panels[((p * groups + g) * PANEL + j) * GROUP + b];
                    sum += (i64::from(x.bytes[r * x.padded + i]) - i64::from(x.zero[r])) * i64::from(q);
                }
                out[r * w.n + o] = sum as f64 * f64::from(x.scale[r]) * f64::from(w.scale[o]) + f64::from(w.bias[o]);
            }
        }
        out
    }

    proptest! {
        /// Every kernel this CPU runs computes the rounded product, whatever the rows (tiles
        /// full and partial), panels (an odd count) and inputs (whole groups or not); each
        /// agrees with the portable kernel to the bit, so all with each other; and the rounded
        /// product is within int8's error of the exact one.
        #[test]
        fn every_int8_kernel_is_the_rounded_product(rows in 1usize..20, panels in 1usize..5, k in 1usize..70, seed in 0u64..1000) {
            let n = panels * PANEL;
            let (weight, bias, x) = super::super::kernels::tests::operands(rows, n, k, seed);
            let w = Quantised::new(&weight, &bias, n, k).unwrap();
            let mut rows_q = Rows::default();
            rows_q.quantise(&x, rows, k);
            let want = reference(&w, &rows_q);
            let out = simd::for_each_kernel(
                |isa: Isa| {
                    let mut out = vec![f32::NAN; rows * n];
                    w.apply(isa, &rows_q, &mut out);
                    out
                },
                |isa, out: &Vec<f32>, portable: &Vec<f32>| -> Result<(), TestCaseError> {
                    for (g, r) in out.iter().zip(&want) {
                        prop_assert!((f64::from(*g) - r).abs() <= 1e-5 * r.abs().max(1.0), "{isa:?}: {g} against {r}");
                    }
                    prop_assert_eq!(portable, out, "{:?} differs from the portable kernel", isa);
                    Ok(())
                },
            )?;
            // Against the exact product (the portable kernel's, which every kernel equals to the
            // bit): each of the k terms is off by at most half a step of the input times the
            // weight, plus half a step of the weight times the input, plus the two half steps'
            // product.
            for r in 0..rows {
                for o in 0..n {
                    let exact: f64 = (0..k).map(|i| f64::from(x[r * k + i]) * f64::from(weight[o * k + i])).sum::<f64>() + f64::from(bias[o]);
                    let bound = k as f64 * (0.5 * f64::from(rows_q.scale[r]) + 0.5 * f64::from(w.scale[o]) + 0.25 * f64::from(rows_q.scale[r] * w.scale[o])) + 1e-5;
                    prop_assert!((f64::from(out[r * n + o]) - exact).abs() <= bound, "{} against {exact}", out[r * n + o]);
                }
            }
        }
    }

    #[test]
    fn rounding_spans_each_row_and_keeps_zero_rows() {
        let mut rows = Rows::default();
        rows.quantise(&[0.5, -1.0, 0.25, 0.0, 0.0, 0.0, 2.0, 1.0, 0.0], 3, 3);
        assert_eq!(rows.padded, 4);
        assert_eq!(rows.scale, [1.5 / 255.0, 0.0, 2.0 / 255.0]);
        // Row 0 spans −1..0.5: zero at 170 (1·170, exactly), 0.5 at 170 + 85 = 255, −1 at 0,
        // 0.25 at 170 + 42.5 → 42 (to even) = 212; padding holds the offset.
        assert_eq!(rows.zero, [170, OFFSET, 0]);
        assert_eq!(&rows.bytes[..4], &[255, 0, 212, 128]);
        assert_eq!(&rows.bytes[4..8], &[128; 4]);
        // A row of no negative values: zero at 0, 1.0 at 127.5 → 128 (to even).
        assert_eq!(&rows.bytes[8..11], &[255, 128, 0]);
        assert!(Quantised::new(&[0.0; 17 * 3], &[0.0; 17], 17, 3).is_none());
    }

    #[test]
    fn split_halves_give_the_same_product() {
        let (n, k, rows) = (6 * PANEL, 40, 3);
        let weight: Vec<f32> = (0..n * k).map(|i| ((i * 37 % 101) as f32 - 50.0) / 50.0).collect();
        let w = Quantised::new(&weight, &vec![0.5; n], n, k).unwrap();
        let x: Vec<f32> = (0..rows * k).map(|i| ((i * 13 % 29) as f32 - 14.0) / 7.0).collect();
        let mut q = Rows::default();
        q.quantise(&x, rows, k);
        let (mut a, mut b) = (vec![0f32; rows * n], vec![1f32; rows * n]);
        w.apply(Isa::detect(), &q, &mut a);
        rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap()
            .install(|| w.apply_on_two(Isa::detect(), &q, &mut b));
        assert_eq!(a, b);
    }
}
