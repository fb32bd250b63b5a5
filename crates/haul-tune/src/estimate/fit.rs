//! Model fitting for the early-stopping estimators: ordinary least squares (normal equations,
//! partial-pivot elimination, a tiny ridge), AR(p) by conditional least squares (Eq. 4.2 of 003),
//! ARMA(p, q) by Hannan–Rissanen (Eq. 4.3), differencing for ARIMA, and a − b/t² (Eq. 4.1).
//! Everything works on normalised data and falls back to the last reading rather than fail.

/// Least squares β minimising ‖Xβ − y‖² + ridge·‖β‖²; rows of `x` are observations.
/// `None` when there are no rows or the system is singular.
pub fn least_squares(x: &[Vec<f64>], y: &[f64]) -> Option<Vec<f64>> {
    let k = x.first()?.len();
    if k == 0 || x.len() != y.len() {
        return None;
    }
    let mut a = vec![vec![0.0; k + 1]; k];
    for (row, &yi) in x.iter().zip(y) {
        for i in 0..k {
            for j in 0..k {
                a[i][j] += row[i] * row[j];
            }
            a[i][k] += row[i] * yi;
        }
    }
    let trace: f64 = (0..k).map(|i| a[i][i]).sum();
    let ridge = 1e-9 * (trace / k as f64).max(1e-12);
    for (i, r) in a.iter_mut().enumerate() {
        r[i] += ridge;
    }
    for col in 0..k {
        let piv = (col..k).max_by(|&p, &q| a[p][col].abs().total_cmp(&a[q][col].abs()))?;
        if a[piv][col].abs() < 1e-300 {
            return None;
        }
        a.swap(col, piv);
        for r in col + 1..k {
            let f = a[r][col] / a[col][col];
            let pivot_row = a[col].clone();
            for (dst, src) in a[r].iter_mut().zip(&pivot_row).skip(col) {
                *dst -= f * src;
            }
        }
    }
    let mut beta = vec![0.0; k];
    for i in (0..k).rev() {
        let s: f64 = (i + 1..k).map(|j| a[i][j] * beta[j]).sum();
        beta[i] = (a[i][k] - s) / a[i][i];
    }
    beta.iter().all(|b| b.is_finite()).then_some(beta)
}

/// Conditional-least-squares AR fit: returns (c, φ₁..φ_p) for X_t = c + Σ φ_i X_{t−i} (Eq. 4.2 of 003).
/// The order is reduced until there are more rows than parameters; `None` if even p = 1 does not fit.
pub fn fit_ar(z: &[f64], p: usize) -> Option<Vec<f64>> {
    let p = (1..=p).rev().find(|&p| z.len() > 2 * p)?;
    let rows: Vec<Vec<f64>> = (p..z.len())
        .map(|t| {
            std::iter::once(1.0)
                .chain((1..=p).map(|i| z[t - i]))
                .collect()
        })
        .collect();
    least_squares(&rows, &z[p..])
}

/// AR one-step prediction from coefficients (c, φ…) and history `h`.
fn ar_step(coef: &[f64], h: &[f64]) -> f64 {
    coef[0]
        + coef[1..]
            .iter()
            .enumerate()
            .map(|(i, phi)| phi * h[h.len() - 1 - i])
            .sum::<f64>()
}

/// Iterated AR forecasts.
pub fn forecast_ar(z: &[f64], p: usize, steps: usize) -> Option<Vec<f64>> {
    let coef = fit_ar(z, p)?;
    let mut h = z.to_vec();
    for _ in 0..steps {
        let v = ar_step(&coef, &h);
        h.push(v);
    }
    Some(h.split_off(z.len()))
}

/// ARMA(p, q) by Hannan–Rissanen: a long AR gives residual estimates, then one regression on
/// lagged values and lagged residuals (Eq. 4.3 of 003). Falls back to AR(p) on short series.
pub fn forecast_arma(z: &[f64], p: usize, q: usize, steps: usize) -> Option<Vec<f64>> {
    if q == 0 {
        return forecast_ar(z, p, steps);
    }
    let m = (p + q).max(2);
    let long = fit_ar(z, m).filter(|c| c.len() == m + 1);
    let start = m + p.max(q);
    let params = 1 + p + q;
    let (Some(long), true) = (long, z.len() > start + params) else {
        return forecast_ar(z, p.max(1), steps);
    };
    let mut e = vec![0.0; z.len()];
    for t in m..z.len() {
        e[t] = z[t] - ar_step(&long, &z[..t]);
    }
    let row = |t: usize, z: &[f64], e: &[f64]| -> Vec<f64> {
        std::iter::once(1.0)
            .chain((1..=p).map(|i| z[t - i]))
            .chain((1..=q).map(|i| e[t - i]))
            .collect()
    };
    let rows: Vec<Vec<f64>> = (start..z.len()).map(|t| row(t, z, &e)).collect();
    let Some(beta) = least_squares(&rows, &z[start..]) else {
        return forecast_ar(z, p.max(1), steps);
    };
    // Residuals of the final model, then iterate with future shocks at zero.
    let dot = |r: Vec<f64>| r.iter().zip(&beta).map(|(a, b)| a * b).sum::<f64>();
    let mut res = vec![0.0; z.len()];
    for t in start..z.len() {
        res[t] = z[t] - dot(row(t, z, &res));
    }
    let mut h = z.to_vec();
    for _ in 0..steps {
        let t = h.len();
        res.push(0.0);
        h.push(0.0);
        let v = dot(row(t, &h, &res));
        h[t] = v;
    }
    Some(h.split_off(z.len()))
}

/// ARIMA(p, d, q): difference `d` times, forecast with ARMA, integrate back.
pub fn forecast_arima(z: &[f64], p: usize, d: usize, q: usize, steps: usize) -> Option<Vec<f64>> {
    if d == 0 {
        return forecast_arma(z, p, q, steps);
    }
    if z.len() < 2 {
        return None;
    }
    let diff: Vec<f64> = z.windows(2).map(|w| w[1] - w[0]).collect();
    let fd = forecast_arima(&diff, p, d - 1, q, steps)?;
    let mut last = *z.last()?;
    Some(
        fd.into_iter()
            .map(|dv| {
                last += dv;
                last
            })
            .collect(),
    )
}

/// X_t = a − b/t² fitted by linear least squares on [1, −1/t²] (Eq. 4.1 of 003). t counts report
/// intervals since the start (t = i + 1); seconds would only rescale b and give the same forecasts.
pub fn forecast_neg_poly(z: &[f64], steps: usize) -> Option<Vec<f64>> {
    if z.len() < 2 {
        return None;
    }
    let inv_t2 = |i: usize| 1.0 / ((i as f64 + 1.0) * (i as f64 + 1.0));
    let rows: Vec<Vec<f64>> = (0..z.len()).map(|i| vec![1.0, -inv_t2(i)]).collect();
    let ab = least_squares(&rows, z)?;
    Some(
        (0..steps)
            .map(|k| ab[0] - ab[1] * inv_t2(z.len() + k))
            .collect(),
    )
}
