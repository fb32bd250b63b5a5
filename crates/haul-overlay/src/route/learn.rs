//! A relay's overhead factor, learned from its past relayed transfers: the thesis leaves overhead
//! prediction open and suggests past split performance as a predictor (002 §6).

/// The smallest factor [`learn_discount`] returns: a relay is discounted, never ruled out.
pub const MIN_DISCOUNT: f64 = 0.05;

/// A relay's overhead factor in `[MIN_DISCOUNT, 1]` from `(predicted_bps, achieved_bps)` pairs
/// of past transfers through it; 1.0 with no usable history.
///
/// `predicted_bps` is the route's prediction *before* discounts (its narrowest leg, 002 §2.4),
/// `achieved_bps` the goodput the transfer reached. The factor is the median of
/// `achieved / predicted` (robust to the odd stalled or lucky transfer, as the thesis's median
/// predictor, 002 §2.3; the two middle values averaged for an even count), clamped to
/// `[MIN_DISCOUNT, 1]`: a relay adds no speed, and a bad run should not exclude it for good.
/// Feed it one-relay transfers through the relay, the window the caller chooses (e.g. the last
/// 9); under the route model a one-relay chain is predicted at exactly `factor · min leg`.
/// Pairs with a prediction that is not a positive finite number, or an achieved value that is
/// negative or not finite, carry no information and are skipped. The ratio also absorbs the
/// leg predictors' own bias on those pairs.
pub fn learn_discount(history: &[(f64, f64)]) -> f64 {
    let mut ratios: Vec<f64> = history
        .iter()
        .filter(|&&(p, a)| p.is_finite() && p > 0.0 && a.is_finite() && a >= 0.0)
        .map(|&(p, a)| a / p)
        .collect();
    if ratios.is_empty() {
        return 1.0;
    }
    ratios.sort_unstable_by(f64::total_cmp);
    let mid = ratios.len() / 2;
    let median = if ratios.len() % 2 == 1 {
        ratios[mid]
    } else {
        (ratios[mid - 1] + ratios[mid]) / 2.0
    };
    median.clamp(MIN_DISCOUNT, 1.0)
}
