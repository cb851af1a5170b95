//! The CPU's vector features, detected once ([`features`]), and the one way a family of
//! hand-written kernels (`embed::kernels`' f32 product, `embed::int8`'s int8 product,
//! `retrieve::index`'s dot products) picks among its kernels: each family keeps its own small
//! enum of the kernels it has and says what each needs ([`Family`]); this module picks the
//! fastest the CPU runs ([`best`]), lists every one it runs ([`available`]), and tests each
//! against the family's portable twin ([`for_each_kernel`], which every family's tests go
//! through). A kernel compiled with `#[target_feature]` is called only after [`features`] found
//! its features, and that is what the `SAFETY` comments at those calls cite.
//!
//! The element-wise loops (GELU, softmax, layer normalisation, int8 row rounding, the index's
//! portable dot products) keep `multiversion`'s own dispatch: they are one plain loop that the
//! compiler vectorises, compiled once per feature set and picked at run time by `multiversion`
//! itself; there is no hand-written kernel to choose and no portable twin to test, since every
//! clone is compiled from the same source, and routing them through here would mean writing
//! each clone's dispatch by hand.
//!
//! Owns feature detection and the choice of a kernel; must not know any kernel's arithmetic,
//! and imports nothing from the crate (layer 0).

use std::sync::OnceLock;

/// The vector features of this CPU that a hand-written kernel may need: all false off x86-64.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Features {
    /// AVX2 (256-bit integer and float vectors).
    pub avx2: bool,
    /// Fused multiply-add on 256-bit vectors.
    pub fma: bool,
    /// AVX-512 Foundation (512-bit vectors).
    pub avx512f: bool,
    /// AVX-512 byte and word instructions.
    pub avx512bw: bool,
    /// AVX-512 Vector Neural Network Instructions (`vpdpbusd`).
    pub avx512vnni: bool,
}

impl Features {
    /// Asks the CPU (through `std`'s run-time detection).
    #[cfg(target_arch = "x86_64")]
    fn detect() -> Features {
        Features {
            avx2: std::arch::is_x86_feature_detected!("avx2"),
            fma: std::arch::is_x86_feature_detected!("fma"),
            avx512f: std::arch::is_x86_feature_detected!("avx512f"),
            avx512bw: std::arch::is_x86_feature_detected!("avx512bw"),
            avx512vnni: std::arch::is_x86_feature_detected!("avx512vnni"),
        }
    }

    /// None of them: no hand-written kernel runs off x86-64.
    #[cfg(not(target_arch = "x86_64"))]
    fn detect() -> Features {
        Features::default()
    }
}

/// This CPU's features, detected on the first call and kept for the process's life.
pub fn features() -> &'static Features {
    static FEATURES: OnceLock<Features> = OnceLock::new();
    FEATURES.get_or_init(Features::detect)
}

/// A family of kernels that compute the same result with different instruction sets: its own
/// enum, one variant a kernel.
pub trait Family: Copy + Eq + std::fmt::Debug + 'static {
    /// The kernel in plain Rust, which every CPU runs: the twin the others are tested against.
    const PORTABLE: Self;
    /// The family's other kernels, fastest first.
    const ACCELERATED: &'static [Self];
    /// Whether a CPU with `cpu`'s features runs this kernel (the portable one: always).
    fn runs_on(self, cpu: &Features) -> bool;
}

/// The fastest kernel of `K` this CPU runs; the portable one where it runs no other.
pub fn best<K: Family>() -> K {
    let cpu = features();
    K::ACCELERATED.iter().copied().find(|k| k.runs_on(cpu)).unwrap_or(K::PORTABLE)
}

/// Every kernel of `K` this CPU runs, fastest first, the portable one last.
pub fn available<K: Family>() -> Vec<K> {
    let cpu = features();
    K::ACCELERATED.iter().copied().filter(|k| k.runs_on(cpu)).chain([K::PORTABLE]).collect()
}

/// Tests every kernel of `K` this CPU runs against its portable twin: runs the portable kernel
/// once (`run`), then each kernel of [`available`] (the portable one given its own result, not
/// a second run), calling `check(kernel, its result, the portable kernel's result)` and stopping
/// at the first error. Returns the portable kernel's result. Every kernel family's tests go
/// through it, so each compares every kernel this CPU has with the same twin.
#[cfg(test)]
pub fn for_each_kernel<K: Family, T, E>(
    mut run: impl FnMut(K) -> T,
    mut check: impl FnMut(K, &T, &T) -> Result<(), E>,
) -> Result<T, E> {
    let portable = run(K::PORTABLE);
    for kernel in available::<K>() {
        if kernel == K::PORTABLE {
            check(kernel, &portable, &portable)?;
        } else {
            let out = run(kernel);
            check(kernel, &out, &portable)?;
        }
    }
    Ok(portable)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A family of one kernel every CPU runs, one no CPU runs and one that needs AVX2.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum Toy {
        Never,
        Avx2,
        Portable,
    }

    impl Family for Toy {
        const PORTABLE: Toy = Toy::Portable;
        const ACCELERATED: &'static [Toy] = &[Toy::Never, Toy::Avx2];
        fn runs_on(self, cpu: &Features) -> bool {
            match self {
                Toy::Never => false,
                Toy::Avx2 => cpu.avx2,
                Toy::Portable => true,
            }
        }
    }

    #[test]
    fn detection_is_cached_and_the_choice_follows_it() {
        assert!(std::ptr::eq(features(), features()));
        let avx2 = features().avx2;
        assert_eq!(available::<Toy>(), if avx2 { vec![Toy::Avx2, Toy::Portable] } else { vec![Toy::Portable] });
        assert_eq!(best::<Toy>(), if avx2 { Toy::Avx2 } else { Toy::Portable });
        #[cfg(not(target_arch = "x86_64"))]
        assert_eq!(*features(), Features::default());
    }

    #[test]
    fn every_kernel_is_checked_against_one_run_of_the_portable_twin() {
        let (mut runs, mut checks) = (Vec::new(), Vec::new());
        let portable = for_each_kernel(
            |k: Toy| {
                runs.push(k);
                format!("{k:?}")
            },
            |k, out: &String, twin: &String| {
                checks.push((k, out.clone(), twin.clone()));
                Ok::<(), &str>(())
            },
        );
        assert_eq!(portable, Ok("Portable".to_string()));
        let mut want_runs = vec![Toy::Portable];
        want_runs.extend(available::<Toy>().into_iter().filter(|&k| k != Toy::Portable));
        assert_eq!(runs, want_runs);
        let want: Vec<_> =
            available::<Toy>().into_iter().map(|k| (k, format!("{k:?}"), "Portable".to_string())).collect();
        assert_eq!(checks, want);
        // The first error stops the loop and is returned.
        let mut seen = 0;
        let stopped = for_each_kernel(
            |_: Toy| (),
            |_, _, _| {
                seen += 1;
                Err("stop")
            },
        );
        assert_eq!((stopped, seen), (Err("stop"), 1));
    }
}
