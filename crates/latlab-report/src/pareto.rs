//! The Pareto front of a trade-off: the points no other point beats on both axes.

/// Indices of the points of `(latency, other)` no other point beats on both (lower latency;
/// lower `other`, or higher when `higher_better`, as for throughput), ordered by latency.
pub fn pareto_front(points: &[(f64, f64)], higher_better: bool) -> Vec<usize> {
    let at_least = |a: f64, b: f64| if higher_better { a >= b } else { a <= b };
    let mut front: Vec<usize> = (0..points.len())
        .filter(|&i| {
            let (l, o) = points[i];
            !points
                .iter()
                .any(|&(ql, qo)| ql <= l && at_least(qo, o) && (ql < l || qo != o))
        })
        .collect();
    front.sort_by(|&a, &b| points[a].0.total_cmp(&points[b].0));
    front
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_front_keeps_only_points_nothing_beats_on_both_axes() {
        let pts = [(10.0, 5.0), (5.0, 8.0), (11.0, 6.0), (4.0, 9.0)];
        assert_eq!(pareto_front(&pts, false), [3, 1, 0]);
        // Higher throughput is better: more work for more latency joins the front.
        let pts = [(10.0, 5.0), (11.0, 6.0), (12.0, 4.0)];
        assert_eq!(pareto_front(&pts, true), [0, 1]);
        // Equal points both stay.
        assert_eq!(pareto_front(&[(1.0, 1.0), (1.0, 1.0)], false), [0, 1]);
        assert!(pareto_front(&[], false).is_empty());
    }
}
