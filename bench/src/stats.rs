//! Order statistics of repeated measurements: median, min, max.

/// Median, minimum and maximum of a non-empty sample.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Spread {
    /// Middle value (mean of the two middle values for an even count).
    pub median: f64,
    /// Smallest value.
    pub min: f64,
    /// Largest value.
    pub max: f64,
}

/// The spread of `values`, or `None` when there are none (NaNs are ignored).
pub fn spread(values: &[f64]) -> Option<Spread> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| !x.is_nan()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let median = if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    };
    Some(Spread {
        median,
        min: v[0],
        max: v[n - 1],
    })
}

/// `value / baseline`, or `None` when the baseline is zero.
pub fn ratio(value: f64, baseline: f64) -> Option<f64> {
    (baseline != 0.0).then(|| value / baseline)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn odd_and_even_medians() {
        let s = spread(&[3.0, 1.0, 2.0]).expect("non-empty");
        assert_eq!(
            s,
            Spread {
                median: 2.0,
                min: 1.0,
                max: 3.0
            }
        );
        assert_eq!(
            spread(&[4.0, 1.0, 3.0, 2.0]).expect("non-empty").median,
            2.5
        );
        assert_eq!(spread(&[7.0]).expect("non-empty").median, 7.0);
    }

    #[test]
    fn empty_and_nan_samples() {
        assert_eq!(spread(&[]), None);
        assert_eq!(spread(&[f64::NAN]), None);
        assert_eq!(spread(&[f64::NAN, 5.0]).expect("one value").median, 5.0);
    }

    #[test]
    fn ratios() {
        assert_eq!(ratio(3.0, 2.0), Some(1.5));
        assert_eq!(ratio(3.0, 0.0), None);
    }
}
