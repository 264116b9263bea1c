//! The Mann-Whitney U test (Wilcoxon rank-sum test) on per-repeat values: does one cell tend to
//! give lower values than the other? It assumes nothing about the distribution of the values, which
//! suits tail statistics such as p99 or the maximum of a run.

/// The result of [`mann_whitney`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MannWhitney {
    /// Number of values of each sample.
    pub n_a: usize,
    pub n_b: usize,
    /// U of sample `a`: pairs `(x in a, y in b)` with `x > y`, ties counting one half.
    pub u_a: f64,
    /// U of sample `b` (`u_a + u_b = n_a * n_b`).
    pub u_b: f64,
    /// Two-sided p-value: the probability, with both samples from one distribution, of a rank sum
    /// at least as far from its expectation as the one seen.
    pub p: f64,
    /// Whether `p` is exact (the permutation distribution of the rank sum, ties included) or the
    /// normal approximation with tie and continuity correction (more than 60 values).
    pub exact: bool,
}

impl MannWhitney {
    /// The usual reported statistic: the smaller of the two U values.
    pub fn u(&self) -> f64 {
        self.u_a.min(self.u_b)
    }
}

/// Largest total number of values for which the p-value is computed exactly.
const EXACT_MAX: usize = 60;

/// The two-sided Mann-Whitney U test of `a` against `b`; `None` when either sample is empty or a
/// value is not a number.
pub fn mann_whitney(a: &[f64], b: &[f64]) -> Option<MannWhitney> {
    if a.is_empty() || b.is_empty() || a.iter().chain(b).any(|v| v.is_nan()) {
        return None;
    }
    let (n_a, n_b) = (a.len(), b.len());
    let n = n_a + n_b;
    // Doubled mid-ranks (integers) of the pooled values.
    let mut pooled: Vec<(f64, bool)> = a
        .iter()
        .map(|&v| (v, true))
        .chain(b.iter().map(|&v| (v, false)))
        .collect();
    pooled.sort_by(|x, y| x.0.total_cmp(&y.0));
    let mut ranks2 = vec![0u64; n];
    let mut ties: Vec<usize> = Vec::new();
    let mut i = 0;
    while i < n {
        let mut j = i;
        while j + 1 < n && pooled[j + 1].0 == pooled[i].0 {
            j += 1;
        }
        // Positions i..=j (ranks i+1..=j+1) share the mean rank (i+1+j+1)/2.
        let r2 = (i + 1 + j + 1) as u64;
        for r in &mut ranks2[i..=j] {
            *r = r2;
        }
        ties.push(j - i + 1);
        i = j + 1;
    }
    let r_a2: u64 = pooled
        .iter()
        .zip(&ranks2)
        .filter(|(p, _)| p.1)
        .map(|(_, r)| *r)
        .sum();
    let r_a = r_a2 as f64 / 2.0;
    let u_a = r_a - (n_a * (n_a + 1)) as f64 / 2.0;
    let u_b = (n_a * n_b) as f64 - u_a;
    // Expected doubled rank sum of a: n_a (n + 1).
    let mean2 = (n_a * (n + 1)) as f64;
    let dev2 = (r_a2 as f64 - mean2).abs();

    let (p, exact) = if n <= EXACT_MAX {
        (exact_p(&ranks2, n_a, mean2, dev2), true)
    } else {
        (normal_p(n_a, n_b, &ties, u_a), false)
    };
    Some(MannWhitney {
        n_a,
        n_b,
        u_a,
        u_b,
        p: p.clamp(0.0, 1.0),
        exact,
    })
}

/// The share of all ways to pick `k` of the doubled ranks whose sum lies at least `dev2` from
/// `mean2`, counted by dynamic programming over (items picked, sum).
fn exact_p(ranks2: &[u64], k: usize, mean2: f64, dev2: f64) -> f64 {
    let total: u64 = ranks2.iter().sum();
    let width = total as usize + 1;
    // ways[c * width + s]: subsets of c items with doubled rank sum s.
    let mut ways = vec![0f64; (k + 1) * width];
    ways[0] = 1.0;
    for &r in ranks2 {
        let r = r as usize;
        for c in (1..=k).rev() {
            for s in (r..width).rev() {
                let add = ways[(c - 1) * width + s - r];
                if add != 0.0 {
                    ways[c * width + s] += add;
                }
            }
        }
    }
    let row = &ways[k * width..(k + 1) * width];
    let all: f64 = row.iter().sum();
    // A tolerance well below the half-rank step keeps the observed sum itself in the tail.
    let tail: f64 = row
        .iter()
        .enumerate()
        .filter(|(s, _)| (*s as f64 - mean2).abs() >= dev2 - 1e-9)
        .map(|(_, w)| *w)
        .sum();
    if all > 0.0 { tail / all } else { 1.0 }
}

/// Normal approximation of the two-sided p-value with tie and continuity correction.
fn normal_p(n_a: usize, n_b: usize, ties: &[usize], u_a: f64) -> f64 {
    let (na, nb) = (n_a as f64, n_b as f64);
    let n = na + nb;
    let mean = na * nb / 2.0;
    let tie_term: f64 = ties
        .iter()
        .map(|&t| {
            let t = t as f64;
            t * t * t - t
        })
        .sum();
    let var = na * nb / 12.0 * ((n + 1.0) - tie_term / (n * (n - 1.0)));
    if var <= 0.0 {
        return 1.0;
    }
    let z = ((u_a - mean).abs() - 0.5).max(0.0) / var.sqrt();
    (2.0 * normal_upper_tail(z)).min(1.0)
}

/// P(Z > z) for a standard normal Z, from the complementary error function (Numerical Recipes'
/// Chebyshev fit, relative error below 1.2e-7).
fn normal_upper_tail(z: f64) -> f64 {
    0.5 * erfc(z / std::f64::consts::SQRT_2)
}

fn erfc(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let r = t
        * (-z * z - 1.265_512_23
            + t * (1.000_023_68
                + t * (0.374_091_96
                    + t * (0.096_784_18
                        + t * (-0.186_288_06
                            + t * (0.278_868_07
                                + t * (-1.135_203_98
                                    + t * (1.488_515_87
                                        + t * (-0.822_152_23 + t * 0.170_872_77)))))))))
            .exp();
    if x >= 0.0 { r } else { 2.0 - r }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn complete_separation_of_three_and_three() {
        // 20 equally likely arrangements; the two extreme ones are as far as the one seen.
        let t = mann_whitney(&[1.0, 2.0, 3.0], &[4.0, 5.0, 6.0]).unwrap();
        assert_eq!((t.u_a, t.u_b, t.u()), (0.0, 9.0, 0.0));
        assert!(close(t.p, 0.1), "{}", t.p);
        assert!(t.exact);
        // Four against four: 2 of 70.
        let t = mann_whitney(&[1.0, 2.0, 3.0, 4.0], &[5.0, 6.0, 7.0, 8.0]).unwrap();
        assert!(close(t.p, 2.0 / 70.0), "{}", t.p);
    }

    #[test]
    fn known_values() {
        // a = {1, 4}, b = {2, 3}: rank sum of a is 5, its expectation 5: p = 1.
        let t = mann_whitney(&[1.0, 4.0], &[2.0, 3.0]).unwrap();
        assert_eq!(t.u_a, 2.0);
        assert!(close(t.p, 1.0));
        // a = {1, 2, 4}, b = {3, 5, 6}: U_a = 1; rank sums 7 or less, or 14 or more: 4 of 20.
        let t = mann_whitney(&[1.0, 2.0, 4.0], &[3.0, 5.0, 6.0]).unwrap();
        assert_eq!(t.u_a, 1.0);
        assert!(close(t.p, 0.2), "{}", t.p);
    }

    #[test]
    fn ties_use_mid_ranks() {
        let t = mann_whitney(&[1.0, 1.0, 1.0], &[1.0, 1.0, 1.0]).unwrap();
        assert_eq!(t.u_a, 4.5);
        assert!(close(t.p, 1.0));
        let t = mann_whitney(&[1.0, 2.0, 2.0], &[2.0, 3.0, 3.0]).unwrap();
        assert_eq!(t.u_a + t.u_b, 9.0);
        assert!(t.p > 0.05 && t.p < 1.0);
    }

    #[test]
    fn large_samples_use_the_normal_approximation() {
        let a: Vec<f64> = (0..40).map(f64::from).collect();
        let b: Vec<f64> = (20..60).map(f64::from).collect();
        let t = mann_whitney(&a, &b).unwrap();
        assert!(!t.exact);
        assert!(t.p < 1e-4, "{}", t.p);
        let t = mann_whitney(&a, &a).unwrap();
        assert!(t.p > 0.99);
        // Exact and approximate agree roughly where both apply.
        let a: Vec<f64> = (0..30).map(|i| f64::from(i) * 1.0).collect();
        let b: Vec<f64> = (0..30).map(|i| f64::from(i) + 6.5).collect();
        let exact = mann_whitney(&a, &b).unwrap();
        let approx = normal_p(30, 30, &[1; 60], exact.u_a);
        assert!(exact.exact);
        assert!((exact.p - approx).abs() < 0.01, "{} {approx}", exact.p);
    }

    #[test]
    fn refuses_empty_and_nan() {
        assert!(mann_whitney(&[], &[1.0]).is_none());
        assert!(mann_whitney(&[f64::NAN], &[1.0]).is_none());
    }

    #[test]
    fn erfc_values() {
        assert!((erfc(0.0) - 1.0).abs() < 1e-7);
        assert!((normal_upper_tail(1.959_964) - 0.025).abs() < 1e-6);
    }
}
