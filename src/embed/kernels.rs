//! The kernels of the packed forward. The matrix product `out = x · Wᵀ + b` for a few to a
//! few thousand rows `x` against one linear layer's weights, packed once at load into panels of
//! [`PANEL`] outputs (for each input feature, the panel's 16 weights side by side), so the inner
//! loop streams each weight once per tile of rows and keeps the tile's sums in registers: three
//! kernels compute the same sums in the same order (AVX-512, AVX2 with FMA, portable), the
//! CPU's features picking one at run time (`crate::simd`). And the element-wise work between
//! the products (GELU, layer normalisation, attention's scores, softmax and weighted sums),
//! written so that it vectorises, compiled for AVX-512 and AVX2 besides the baseline and picked
//! at run time (`multiversion`). The learned relevance's forward (`gnn::packed`) runs its
//! layers on the same product. Owns packing and the kernels; must not know either model.

use crate::simd;

/// Outputs per panel.
pub(crate) const PANEL: usize = 16;

/// A linear layer packed for [`Packed::apply`]: `n` outputs of `k` inputs.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Packed {
    /// Panel p holds, for each input i, the weights of outputs 16p..16p+16: `[p][i][j]`.
    panels: Vec<f32>,
    bias: Vec<f32>,
    k: usize,
    n: usize,
}

/// The instruction set a kernel uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Isa {
    Avx512,
    Avx2,
    Portable,
}

impl Isa {
    /// The fastest this CPU runs ([`simd::best`]).
    pub(crate) fn detect() -> Isa {
        simd::best()
    }
}

impl simd::Family for Isa {
    const PORTABLE: Isa = Isa::Portable;
    const ACCELERATED: &'static [Isa] = &[Isa::Avx512, Isa::Avx2];

    fn runs_on(self, cpu: &simd::Features) -> bool {
        match self {
            Isa::Avx512 => cpu.avx512f,
            Isa::Avx2 => cpu.avx2 && cpu.fma,
            Isa::Portable => true,
        }
    }
}

impl Packed {
    /// Packs `weight` (`n × k`, row-major: PyTorch's `Linear.weight`) and `bias` (`n`). `n`
    /// must be a multiple of [`PANEL`] (every layer of MiniLM is).
    pub(crate) fn new(weight: &[f32], bias: &[f32], n: usize, k: usize) -> Option<Packed> {
        if !n.is_multiple_of(PANEL) || weight.len() != n * k || bias.len() != n {
            return None;
        }
        let mut packed = Packed::empty();
        packed.repack(weight, n, k);
        packed.bias.copy_from_slice(bias);
        Some(packed)
    }

    /// [`Packed::new`] without a bias, reusing this layer's buffers: `weight` is `n × k`.
    pub(super) fn repack(&mut self, weight: &[f32], n: usize, k: usize) {
        debug_assert!(weight.len() == n * k);
        self.repack_with(n, k, |o, i| weight[o * k + i]);
    }

    /// This layer's buffers refilled with `n` outputs of `k` inputs, output o's weight of input
    /// i being `weight(o, i)`, and no bias (attention packs its keys and values this way, read
    /// straight from the query-key-value rows).
    #[inline(always)]
    pub(super) fn repack_with(&mut self, n: usize, k: usize, weight: impl Fn(usize, usize) -> f32) {
        debug_assert!(n.is_multiple_of(PANEL));
        self.panels.resize(n * k, 0.0);
        self.bias.clear();
        self.bias.resize(n, 0.0);
        (self.n, self.k) = (n, k);
        for p in 0..n / PANEL {
            for i in 0..k {
                let at = (p * k + i) * PANEL;
                for (j, w) in self.panels[at..at + PANEL].iter_mut().enumerate() {
                    *w = weight(p * PANEL + j, i);
                }
            }
        }
    }

    /// An empty layer, to [`Packed::repack`].
    pub(super) fn empty() -> Packed {
        Packed { panels: Vec::new(), bias: Vec::new(), k: 0, n: 0 }
    }

    /// Inputs.
    pub(super) fn inputs(&self) -> usize {
        self.k
    }

    /// Outputs.
    pub(crate) fn outputs(&self) -> usize {
        self.n
    }

    /// `out[r] = x[r] · Wᵀ + b` for every row r of `x` (`rows × k`); `out` is `rows × n`.
    pub(crate) fn apply(&self, isa: Isa, x: &[f32], rows: usize, out: &mut [f32]) {
        assert!(x.len() >= rows * self.k && out.len() >= rows * self.n, "matrix sizes");
        // SAFETY: the assertion bounds every row of `x` and `out`; one caller writes all panels.
        unsafe { self.apply_panels(isa, x, rows, out.as_mut_ptr(), 0..self.n / PANEL) }
    }

    /// [`Packed::apply`] with the panels split in two halves, one on the calling thread and one
    /// on another of the current rayon pool: one text's product on two cores.
    pub(super) fn apply_on_two(&self, isa: Isa, x: &[f32], rows: usize, out: &mut [f32]) {
        assert!(x.len() >= rows * self.k && out.len() >= rows * self.n, "matrix sizes");
        // SAFETY: the assertion bounds every row of `x` and `out`; each half writes only its
        // panels' columns.
        on_two(self.n / PANEL, out, |o, panels| unsafe { self.apply_panels(isa, x, rows, o, panels) });
    }

    /// The product's columns of `panels` into `out` (`rows × n`).
    ///
    /// # Safety
    /// `x` holds `rows × k` values, `out` points to `rows × n`, and no other thread writes the
    /// columns of `panels` meanwhile.
    unsafe fn apply_panels(&self, isa: Isa, x: &[f32], rows: usize, out: *mut f32, panels: std::ops::Range<usize>) {
        match isa {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `isa` came from `simd::best` or `simd::available`, which offer a kernel
            // only where `simd::features` found the CPU features it is compiled for
            // (`Isa::runs_on`); the caller bounds every index.
            Isa::Avx512 => unsafe { x86::apply_avx512(self, x, rows, out, panels) },
            #[cfg(target_arch = "x86_64")]
            // SAFETY: as above.
            Isa::Avx2 => unsafe { x86::apply_avx2(self, x, rows, out, panels) },
            // SAFETY: as above.
            _ => unsafe { self.apply_portable(x, rows, out, panels) },
        }
    }

    unsafe fn apply_portable(&self, x: &[f32], rows: usize, out: *mut f32, panels: std::ops::Range<usize>) {
        let (k, n) = (self.k, self.n);
        for p in panels {
            let panel = &self.panels[p * k * PANEL..(p + 1) * k * PANEL];
            for r in 0..rows {
                let mut acc = [0f32; PANEL];
                let xr = &x[r * k..(r + 1) * k];
                for (i, &xv) in xr.iter().enumerate() {
                    let w = &panel[i * PANEL..(i + 1) * PANEL];
                    for j in 0..PANEL {
                        acc[j] = xv.mul_add(w[j], acc[j]);
                    }
                }
                for (j, a) in acc.iter().enumerate() {
                    // SAFETY: the caller bounds `out` to `rows × n`.
                    unsafe { *out.add(r * n + p * PANEL + j) = a + self.bias[p * PANEL + j] };
                }
            }
        }
    }
}

/// `write(out, panels)` for the panels `0..panels` cut in two, one half on the calling thread
/// and one on another of the current rayon pool; an even cut, so that AVX-512's pairs of panels
/// stay whole. `write` must write only the columns of the panels it is given.
pub(super) fn on_two(panels: usize, out: &mut [f32], write: impl Fn(*mut f32, std::ops::Range<usize>) + Sync) {
    let half = (panels / 2) & !1;
    struct Out(*mut f32);
    // SAFETY: the two halves write disjoint columns of `out`, which outlives both.
    unsafe impl Send for Out {}
    unsafe impl Sync for Out {}
    let o = Out(out.as_mut_ptr());
    let o = &o;
    rayon::join(|| write(o.0, 0..half), || write(o.0, half..panels));
}

/// Lanes of the partial sums a reduction keeps, so that it vectorises.
const LANES: usize = 16;

/// The sum of `v`, in [`LANES`] partial sums.
#[inline(always)]
fn lane_sum(v: &[f32], f: impl Fn(f32) -> f32) -> f32 {
    let mut acc = [0f32; LANES];
    let chunks = v.chunks_exact(LANES);
    let rest = chunks.remainder();
    for c in chunks {
        for l in 0..LANES {
            acc[l] += f(c[l]);
        }
    }
    acc.iter().sum::<f32>() + rest.iter().map(|&x| f(x)).sum::<f32>()
}

/// The least and largest of `v` (±∞ when empty; NaNs skipped), in [`LANES`] partial folds, so
/// that it vectorises (a fold through one value is a chain of dependent steps).
#[inline(always)]
pub(super) fn lane_range(v: &[f32]) -> (f32, f32) {
    let mut lo = [f32::INFINITY; LANES];
    let mut hi = [f32::NEG_INFINITY; LANES];
    let chunks = v.chunks_exact(LANES);
    let rest = chunks.remainder();
    for c in chunks {
        for l in 0..LANES {
            // Comparisons, not `f32::min`/`max` (whose NaN rules keep the loop scalar).
            lo[l] = if c[l] < lo[l] { c[l] } else { lo[l] };
            hi[l] = if c[l] > hi[l] { c[l] } else { hi[l] };
        }
    }
    let fold = |a: &[f32], init: f32, f: fn(f32, f32) -> f32| a.iter().copied().fold(init, f);
    (
        fold(rest, fold(&lo, f32::INFINITY, f32::min), f32::min),
        fold(rest, fold(&hi, f32::NEG_INFINITY, f32::max), f32::max),
    )
}

/// `e^x` to about 2e-7 relative: `x = n·ln 2 + r` with |r| ≤ ln 2 / 2, `e^r` by its Taylor
/// series to degree 6, `2^n` put in the exponent's bits. Branch-free, so a loop of it
/// vectorises; `x` is clamped to [-87, 88], where f32 holds `e^x`.
#[inline(always)]
fn exp(x: f32) -> f32 {
    let x = x.clamp(-87.0, 88.0);
    let n = (x * std::f32::consts::LOG2_E + 0.5).floor();
    // ln 2 in two parts, the first exact in few bits, so that n·ln 2 loses nothing.
    let r = x - n * 0.693_145_75 - n * 1.428_606_8e-6;
    let p = 1.0 + r * (1.0 + r * (0.5 + r * (1.0 / 6.0 + r * (1.0 / 24.0 + r * (1.0 / 120.0 + r * (1.0 / 720.0))))));
    // 2^n from n's bits: n + 1.5·2^23 holds n in its low mantissa bits, exactly (|n| ≤ 126),
    // so no float-to-integer conversion (whose saturation keeps a loop from vectorising).
    let n_bits = (n + 12_582_912.0).to_bits().wrapping_sub(0x4B40_0000);
    p * f32::from_bits(n_bits.wrapping_add(127) << 23)
}

/// The error function (Abramowitz and Stegun, 7.1.26: 1.5e-7 in exact arithmetic, within 6e-7
/// in f32's), branch-free.
#[inline(always)]
fn erf(x: f32) -> f32 {
    let a = x.abs();
    let t = 1.0 / (1.0 + 0.327_591_1 * a);
    let poly = t * (0.254_829_6 + t * (-0.284_496_74 + t * (1.421_413_7 + t * (-1.453_152 + t * 1.061_405_4))));
    let y = 1.0 - poly * exp(-a * a);
    y.copysign(x)
}

/// GELU with the error function (BERT's `gelu`), in place.
#[multiversion::multiversion(targets("x86_64+avx512f+avx512vl", "x86_64+avx2+fma"))]
pub(crate) fn gelu(v: &mut [f32]) {
    for x in v.iter_mut() {
        *x = 0.5 * *x * (1.0 + erf(*x * std::f32::consts::FRAC_1_SQRT_2));
    }
}

/// `x = LayerNorm(x + y)` for every row (`width` wide) of `x`; no `y`: `LayerNorm(x)`.
#[multiversion::multiversion(targets("x86_64+avx512f+avx512vl", "x86_64+avx2+fma"))]
pub(crate) fn add_and_normalise(x: &mut [f32], y: Option<&[f32]>, width: usize, gamma: &[f32], beta: &[f32], eps: f32) {
    for (r, row) in x.chunks_exact_mut(width).enumerate() {
        if let Some(y) = y {
            for (a, b) in row.iter_mut().zip(&y[r * width..(r + 1) * width]) {
                *a += b;
            }
        }
        let mean = lane_sum(row, |v| v) / width as f32;
        row.iter_mut().for_each(|v| *v -= mean);
        let var = lane_sum(row, |v| v * v) / width as f32;
        let inv = 1.0 / (var + eps).sqrt();
        for ((v, g), b) in row.iter_mut().zip(gamma).zip(beta) {
            *v = *v * inv * g + b;
        }
    }
}

/// Softmax of the first `n` values of each row (`width` wide) of `scores`, in place; the rest
/// of each row (padding) is set to 0.
#[multiversion::multiversion(targets("x86_64+avx512f+avx512vl", "x86_64+avx2+fma"))]
pub(super) fn softmax_rows(scores: &mut [f32], width: usize, n: usize) {
    for row in scores.chunks_exact_mut(width) {
        let (live, pad) = row.split_at_mut(n);
        let max = lane_range(live).1;
        live.iter_mut().for_each(|s| *s = exp(*s - max));
        let inv = 1.0 / lane_sum(live, |v| v);
        live.iter_mut().for_each(|s| *s *= inv);
        pad.iter_mut().for_each(|s| *s = 0.0);
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;
    use std::ops::Range;

    use crate::embed::kernels::{PANEL, Packed};

    /// Rows of a tile (each kernel's sums for 6 rows × 2 panels fill 12 vector registers).
    const ROWS: usize = 6;

    /// AVX-512: a tile is `ROWS` rows × two panels, one 16-wide register per row and panel.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn apply_avx512(w: &Packed, x: &[f32], rows: usize, op: *mut f32, panels: Range<usize>) {
        // SAFETY: the caller checked the CPU features and that `x` and `out` hold `rows` rows;
        // every pointer below stays inside the panels, the bias, `x` or `out`.
        unsafe {
            let (k, n) = (w.k, w.n);
            let (xp, wp, bp) = (x.as_ptr(), w.panels.as_ptr(), w.bias.as_ptr());
            let mut p = panels.start;
            while p < panels.end {
                let two = p + 1 < panels.end;
                let (w0, w1) = (wp.add(p * k * PANEL), wp.add((p + usize::from(two)) * k * PANEL));
                let mut r = 0;
                while r < rows {
                    let m = (rows - r).min(ROWS);
                    let mut acc0 = [_mm512_setzero_ps(); ROWS];
                    let mut acc1 = [_mm512_setzero_ps(); ROWS];
                    for i in 0..k {
                        let a = _mm512_loadu_ps(w0.add(i * PANEL));
                        let b = _mm512_loadu_ps(w1.add(i * PANEL));
                        macro_rules! row {
                            ($t:literal) => {
                                if $t < m {
                                    let v = _mm512_set1_ps(*xp.add((r + $t) * k + i));
                                    acc0[$t] = _mm512_fmadd_ps(v, a, acc0[$t]);
                                    acc1[$t] = _mm512_fmadd_ps(v, b, acc1[$t]);
                                }
                            };
                        }
                        row!(0);
                        row!(1);
                        row!(2);
                        row!(3);
                        row!(4);
                        row!(5);
                    }
                    let b0 = _mm512_loadu_ps(bp.add(p * PANEL));
                    let b1 = if two { _mm512_loadu_ps(bp.add((p + 1) * PANEL)) } else { _mm512_setzero_ps() };
                    for t in 0..m {
                        _mm512_storeu_ps(op.add((r + t) * n + p * PANEL), _mm512_add_ps(acc0[t], b0));
                        if two {
                            _mm512_storeu_ps(op.add((r + t) * n + (p + 1) * PANEL), _mm512_add_ps(acc1[t], b1));
                        }
                    }
                    r += m;
                }
                p += 2;
            }
        }
    }

    /// AVX2: a tile is `ROWS` rows × one panel, two 8-wide registers per row.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn apply_avx2(w: &Packed, x: &[f32], rows: usize, op: *mut f32, panels: Range<usize>) {
        // SAFETY: the caller checked the CPU features and that `x` and `out` hold `rows` rows;
        // every pointer below stays inside the panels, the bias, `x` or `out`.
        unsafe {
            let (k, n) = (w.k, w.n);
            let (xp, wp, bp) = (x.as_ptr(), w.panels.as_ptr(), w.bias.as_ptr());
            for p in panels {
                let w0 = wp.add(p * k * PANEL);
                let mut r = 0;
                while r < rows {
                    let m = (rows - r).min(ROWS);
                    let mut lo = [_mm256_setzero_ps(); ROWS];
                    let mut hi = [_mm256_setzero_ps(); ROWS];
                    for i in 0..k {
                        let a = _mm256_loadu_ps(w0.add(i * PANEL));
                        let b = _mm256_loadu_ps(w0.add(i * PANEL + 8));
                        macro_rules! row {
                            ($t:literal) => {
                                if $t < m {
                                    let v = _mm256_set1_ps(*xp.add((r + $t) * k + i));
                                    lo[$t] = _mm256_fmadd_ps(v, a, lo[$t]);
                                    hi[$t] = _mm256_fmadd_ps(v, b, hi[$t]);
                                }
                            };
                        }
                        row!(0);
                        row!(1);
                        row!(2);
                        row!(3);
                        row!(4);
                        row!(5);
                    }
                    let (b0, b1) = (_mm256_loadu_ps(bp.add(p * PANEL)), _mm256_loadu_ps(bp.add(p * PANEL + 8)));
                    for t in 0..m {
                        _mm256_storeu_ps(op.add((r + t) * n + p * PANEL), _mm256_add_ps(lo[t], b0));
                        _mm256_storeu_ps(op.add((r + t) * n + p * PANEL + 8), _mm256_add_ps(hi[t], b1));
                    }
                    r += m;
                }
            }
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use proptest::prelude::*;

    use super::*;

    /// A product's operands from `seed`, values in [−1, 1]: the weights (`n × k`), the bias and
    /// the input rows (`rows × k`); the f32 and the int8 kernels' tests share them.
    pub(in crate::embed) fn operands(rows: usize, n: usize, k: usize, seed: u64) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
        let value = |i: usize| (((i as u64 * 2654435761 + seed * 40503) % 2001) as f32 - 1000.0) / 1000.0;
        let weight = (0..n * k).map(value).collect();
        let bias = (0..n).map(|i| value(i + 7)).collect();
        let x = (0..rows * k).map(|i| value(i + 13)).collect();
        (weight, bias, x)
    }

    /// The product in f64, straight from the unpacked weights.
    fn reference(weight: &[f32], bias: &[f32], x: &[f32], rows: usize, n: usize, k: usize) -> Vec<f64> {
        let mut out = vec![0f64; rows * n];
        for r in 0..rows {
            for o in 0..n {
                let dot: f64 = (0..k).map(|i| f64::from(x[r * k + i]) * f64::from(weight[o * k + i])).sum();
                out[r * n + o] = dot + f64::from(bias[o]);
            }
        }
        out
    }

    proptest! {
        /// Every kernel this CPU runs gives the product to 1e-5 relative, whatever the rows
        /// (tiles full and partial), panels (an odd count: a lone last panel) and inputs; and
        /// each agrees with the portable kernel to the bit, so all with each other (the same
        /// sums in the same order).
        #[test]
        fn every_kernel_is_the_product(rows in 1usize..20, panels in 1usize..5, k in 1usize..70, seed in 0u64..1000) {
            let n = panels * PANEL;
            let (weight, bias, x) = operands(rows, n, k, seed);
            let packed = Packed::new(&weight, &bias, n, k).unwrap();
            let want = reference(&weight, &bias, &x, rows, n, k);
            simd::for_each_kernel(
                |isa: Isa| {
                    let mut out = vec![f32::NAN; rows * n];
                    packed.apply(isa, &x, rows, &mut out);
                    out
                },
                |isa, out: &Vec<f32>, portable: &Vec<f32>| -> Result<(), TestCaseError> {
                    for (g, w) in out.iter().zip(&want) {
                        let scale = w.abs().max(1.0);
                        prop_assert!(((f64::from(*g) - w) / scale).abs() < 1e-5, "{isa:?}: {g} against {w}");
                    }
                    prop_assert_eq!(portable, out, "{:?} differs from the portable kernel", isa);
                    Ok(())
                },
            )?;
        }
    }

    #[test]
    fn exp_and_erf_are_within_their_stated_error() {
        let mut worst = (0f64, 0f64);
        for i in -80_000..=80_000 {
            let x = i as f32 / 1000.0;
            let e = f64::from(exp(x));
            let want = f64::from(x).exp();
            worst.0 = worst.0.max(((e - want) / want).abs());
            worst.1 = worst.1.max((f64::from(erf(x / 10.0)) - libm::erf(f64::from(x / 10.0))).abs());
        }
        assert!(worst.0 < 3e-7, "exp: relative error {}", worst.0);
        assert!(worst.1 < 6e-7, "erf: absolute error {}", worst.1);
        assert_eq!(exp(-1000.0), exp(-87.0));
        assert!(exp(1000.0).is_finite());
    }

    #[test]
    fn a_layer_that_does_not_fill_its_panels_is_refused() {
        assert!(Packed::new(&[0.0; 17 * 3], &[0.0; 17], 17, 3).is_none());
        assert!(Packed::new(&[0.0; 16 * 3], &[0.0; 15], 16, 3).is_none());
    }
}
