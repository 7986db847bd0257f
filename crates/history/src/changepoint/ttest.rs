//! Welch's two-sample t-test, the significance of a split: the p-value
//! that two segments of a series share one mean. Owns the Student t
//! distribution it needs (the regularized incomplete beta function and
//! `ln Γ`), so the crate depends on no statistics library.

/// The two-sided p-value of Welch's t-test between `left` and `right`
/// (unequal variances, Welch-Satterthwaite degrees of freedom).
///
/// Each side needs two values; with fewer, or when the statistics
/// overflow, the answer is 1 (no evidence). Two segments without any
/// spread are 0 apart when their means differ (a clean step) and 1 when
/// they do not.
#[allow(clippy::float_cmp)] // two exact means: a clean step or none
pub(crate) fn welch_pvalue(left: &[f64], right: &[f64]) -> f64 {
    let (Some((m1, v1)), Some((m2, v2))) = (mean_var(left), mean_var(right)) else {
        return 1.0;
    };
    #[allow(clippy::cast_precision_loss)] // segment lengths are far below 2^52
    let (n1, n2) = (left.len() as f64, right.len() as f64);
    let (s1, s2) = (v1 / n1, v2 / n2);
    let se2 = s1 + s2;
    if !se2.is_finite() {
        return 1.0;
    }
    if se2 <= 0.0 {
        return if m1 == m2 { 1.0 } else { 0.0 };
    }
    let t = (m2 - m1) / se2.sqrt();
    let df = se2 * se2 / (s1 * s1 / (n1 - 1.0) + s2 * s2 / (n2 - 1.0));
    if !t.is_finite() || !df.is_finite() || df <= 0.0 {
        return 1.0;
    }
    student_two_sided(t, df)
}

/// The mean and the unbiased variance, for two values or more whose
/// statistics are finite.
fn mean_var(xs: &[f64]) -> Option<(f64, f64)> {
    if xs.len() < 2 {
        return None;
    }
    #[allow(clippy::cast_precision_loss)]
    let n = xs.len() as f64;
    let mean = xs.iter().sum::<f64>() / n;
    let var = xs.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / (n - 1.0);
    (mean.is_finite() && var.is_finite()).then_some((mean, var))
}

/// `P(|T| >= |t|)` for Student's t with `df` degrees of freedom:
/// `I_{df/(df+t²)}(df/2, 1/2)`.
pub(crate) fn student_two_sided(t: f64, df: f64) -> f64 {
    let x = df / (df + t * t);
    regularized_incomplete_beta(df / 2.0, 0.5, x).clamp(0.0, 1.0)
}

/// `I_x(a, b)` for `a, b > 0`, by the continued fraction (Numerical
/// Recipes, 3rd ed., 6.4), on the side where it converges fast.
fn regularized_incomplete_beta(a: f64, b: f64, x: f64) -> f64 {
    if x.is_nan() {
        return f64::NAN;
    }
    if x <= 0.0 {
        return 0.0;
    }
    if x >= 1.0 {
        return 1.0;
    }
    let ln_front = ln_gamma(a + b) - ln_gamma(a) - ln_gamma(b) + a * x.ln() + b * (1.0 - x).ln();
    if x < (a + 1.0) / (a + b + 2.0) {
        ln_front.exp() * beta_continued_fraction(a, b, x) / a
    } else {
        1.0 - ln_front.exp() * beta_continued_fraction(b, a, 1.0 - x) / b
    }
}

/// The continued fraction of the incomplete beta function, by the modified
/// Lentz method; the names are those of Numerical Recipes.
#[allow(clippy::many_single_char_names)]
fn beta_continued_fraction(a: f64, b: f64, x: f64) -> f64 {
    const TINY: f64 = 1e-300;
    const EPS: f64 = 1e-15;
    let guard = |v: f64| if v.abs() < TINY { TINY } else { v };
    let (qab, qap, qam) = (a + b, a + 1.0, a - 1.0);
    let mut c = 1.0;
    let mut d = 1.0 / guard(1.0 - qab * x / qap);
    let mut h = d;
    for m in 1..=300_u32 {
        let m = f64::from(m);
        let m2 = 2.0 * m;
        let aa = m * (b - m) * x / ((qam + m2) * (a + m2));
        d = 1.0 / guard(1.0 + aa * d);
        c = guard(1.0 + aa / c);
        h *= d * c;
        let aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
        d = 1.0 / guard(1.0 + aa * d);
        c = guard(1.0 + aa / c);
        let step = d * c;
        h *= step;
        if (step - 1.0).abs() < EPS {
            break;
        }
    }
    h
}

/// `ln Γ(x)` for `x > 0`: the Lanczos approximation (g = 7, nine terms),
/// with the reflection formula below 1/2.
fn ln_gamma(x: f64) -> f64 {
    const G: f64 = 7.0;
    const COEFFICIENTS: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        let pi = std::f64::consts::PI;
        return (pi / (pi * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let mut sum = COEFFICIENTS[0];
    for (i, c) in COEFFICIENTS.iter().enumerate().skip(1) {
        #[allow(clippy::cast_precision_loss)]
        let i = i as f64;
        sum += c / (x + i);
    }
    let t = x + G + 0.5;
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + sum.ln()
}

#[cfg(test)]
#[allow(clippy::float_cmp)] // exact p-values are meant
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    #[test]
    fn ln_gamma_matches_factorials() {
        let mut factorial = 1.0_f64;
        for n in 1..20_u32 {
            // Γ(n) = (n - 1)!
            assert!(
                close(ln_gamma(f64::from(n)), factorial.ln(), 1e-12),
                "n = {n}"
            );
            factorial *= f64::from(n);
        }
        assert!(close(
            ln_gamma(0.5),
            std::f64::consts::PI.sqrt().ln(),
            1e-12
        ));
    }

    #[test]
    fn student_matches_closed_forms() {
        // One degree of freedom is Cauchy: p = 1 - 2 atan|t| / π.
        // Two: p = 1 - |t| / sqrt(2 + t²).
        for t in [0.0, 0.1, 0.5, 1.0, 2.0, 5.0, 30.0] {
            let cauchy = 1.0 - 2.0 * f64::atan(t) / std::f64::consts::PI;
            assert!(close(student_two_sided(t, 1.0), cauchy, 1e-12), "t = {t}");
            let two = 1.0 - t / (2.0 + t * t).sqrt();
            assert!(close(student_two_sided(t, 2.0), two, 1e-12), "t = {t}");
        }
    }

    #[test]
    fn student_matches_tables() {
        // Two-sided critical values of Student's t, and a tail checked by
        // Simpson integration of the density.
        assert!(close(student_two_sided(2.228_138_85, 10.0), 0.05, 1e-8));
        assert!(close(student_two_sided(2.042_272_46, 30.0), 0.05, 1e-8));
        assert!(close(student_two_sided(3.390_491, 100.0), 0.001, 1e-8));
        assert!(close(student_two_sided(4.0, 1000.0), 6.800_99e-5, 1e-9));
        assert!(student_two_sided(60.0, 50.0) < 1e-40);
    }

    #[test]
    fn welch_is_symmetric_and_degenerate_cases_are_decided() {
        let a = [1.0, 2.0, 3.0, 4.0];
        let b = [2.5, 3.5, 4.5, 6.0, 7.0];
        assert!(close(welch_pvalue(&a, &b), welch_pvalue(&b, &a), 1e-15));
        assert_eq!(welch_pvalue(&[1.0, 1.0], &[2.0, 2.0]), 0.0);
        assert_eq!(welch_pvalue(&[1.0, 1.0], &[1.0, 1.0]), 1.0);
        assert_eq!(welch_pvalue(&[1.0], &[2.0, 3.0]), 1.0);
        assert_eq!(welch_pvalue(&[f64::MAX, f64::MAX], &[0.0, 1.0]), 1.0);
    }

    #[test]
    fn welch_matches_a_worked_example() {
        // t = -2.07401, df = 10.2092 (Welch-Satterthwaite); the p-value
        // by Simpson integration of the t density is 0.0642800.
        let a = [19.8, 20.4, 19.6, 17.8, 18.5, 18.9, 18.3, 18.9, 19.5, 22.0];
        let b = [28.2, 26.6, 20.1, 23.3, 25.2, 22.1, 17.7, 27.6, 20.6, 13.7];
        let p = welch_pvalue(&a, &b);
        assert!(close(p, 0.064_280_0, 1e-7), "p = {p}");
    }
}
