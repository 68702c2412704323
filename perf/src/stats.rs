//! Small statistics used by reports and compare mode: median, ratio, spread, balance.

/// Median of the finite values in `xs` (mean of the middle two for an even count), or `None`
/// when there are none.
pub fn median(xs: &[f64]) -> Option<f64> {
    let mut v: Vec<f64> = xs.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    Some(if v.len() % 2 == 1 {
        v[mid]
    } else {
        (v[mid - 1] + v[mid]) / 2.0
    })
}

/// `a / b`, or `None` when either side is missing, non-finite, or `b` is zero.
pub fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    let (a, b) = (a?, b?);
    if !a.is_finite() || !b.is_finite() || b == 0.0 {
        return None;
    }
    Some(a / b)
}

/// (max - min) / median, a crude relative spread of repeated measurements.
pub fn spread(xs: &[f64]) -> Option<f64> {
    let m = median(xs)?;
    let finite = xs.iter().copied().filter(|x| x.is_finite());
    let min = finite.clone().fold(f64::INFINITY, f64::min);
    let max = finite.fold(f64::NEG_INFINITY, f64::max);
    ratio(Some(max - min), Some(m))
}

/// Balance of per-member counts (queue groups): min / max, 1.0 when perfectly even.
pub fn balance(counts: &[u64]) -> Option<f64> {
    let min = *counts.iter().min()?;
    let max = *counts.iter().max()?;
    if max == 0 {
        return None;
    }
    Some(min as f64 / max as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_odd_even_empty() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&[7.0]), Some(7.0));
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[f64::NAN, 5.0]), Some(5.0), "NaN ignored");
    }

    #[test]
    fn ratio_guards() {
        assert_eq!(ratio(Some(6.0), Some(3.0)), Some(2.0));
        assert_eq!(ratio(Some(1.0), Some(0.0)), None);
        assert_eq!(ratio(None, Some(1.0)), None);
        assert_eq!(ratio(Some(f64::INFINITY), Some(1.0)), None);
    }

    #[test]
    fn spread_and_balance() {
        assert_eq!(spread(&[9.0, 10.0, 11.0]), Some(0.2));
        assert_eq!(balance(&[50, 100, 75]), Some(0.5));
        assert_eq!(balance(&[0, 0]), None);
        assert_eq!(balance(&[]), None);
    }
}
