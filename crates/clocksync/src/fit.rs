//! Lines through offset brackets: the minimax fit and its checks.
//!
//! A bracket says the true offset at time `x` lies in `[lo, hi]`. For a line
//! y = a + b·x, its distance to the far end of bracket i is
//! `max(y(x_i) − lo_i, hi_i − y(x_i))`: the largest error the line can have
//! at `x_i`. For a fixed slope b, the best intercept balances the highest
//! `hi_i − b·x_i` against the lowest `lo_i − b·x_i`, and the worst distance
//! is half their spread:
//!
//! ```text
//!     f(b) = max_i (hi_i − b·x_i) − min_i (lo_i − b·x_i),   bound = f(b) / 2
//! ```
//!
//! `f` is a maximum of linear functions of b, hence convex: a ternary search
//! finds its minimum, and its sublevel set near the minimum is an interval of
//! equally good slopes, from which the slope closest to a hint (the
//! least-squares slope of the midpoints) is taken. In the same way
//! `g(b) = max_i (lo_i − b·x_i) − min_i (hi_i − b·x_i)` is ≤ 0 exactly when
//! some line with slope b passes through every bracket: `min g / 2` says how
//! far the brackets are from admitting one straight line.

/// The true value at `x` lies in `[lo, hi]` (all relative to the caller's origin).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bracket {
    pub x: f64,
    pub lo: f64,
    pub hi: f64,
}

impl Bracket {
    pub fn mid(&self) -> f64 {
        (self.lo + self.hi) / 2.0
    }
    pub fn half_width(&self) -> f64 {
        (self.hi - self.lo) / 2.0
    }
}

/// y = a + b·x.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Line {
    pub a: f64,
    pub b: f64,
}

impl Line {
    pub fn at(&self, x: f64) -> f64 {
        self.a + self.b * x
    }

    /// Largest error the line can have at `br.x`.
    pub fn distance(&self, br: &Bracket) -> f64 {
        let y = self.at(br.x);
        (y - br.lo).max(br.hi - y)
    }

    /// Largest [`Line::distance`] over `brackets`.
    pub fn worst_distance(&self, brackets: &[Bracket]) -> f64 {
        brackets
            .iter()
            .map(|br| self.distance(br))
            .fold(0.0, f64::max)
    }
}

/// Slopes searched: ±5 % (50 000 ppm), far beyond any working clock.
pub const MAX_SLOPE: f64 = 0.05;

/// Weighted least squares through the midpoints (weight 1/half-width²).
/// `None` with fewer than two distinct `x`.
pub fn least_squares(brackets: &[Bracket]) -> Option<Line> {
    let w = |br: &Bracket| 1.0 / br.half_width().max(1.0).powi(2);
    let sw: f64 = brackets.iter().map(w).sum();
    let mx = brackets.iter().map(|br| w(br) * br.x).sum::<f64>() / sw;
    let my = brackets.iter().map(|br| w(br) * br.mid()).sum::<f64>() / sw;
    let sxx: f64 = brackets.iter().map(|br| w(br) * (br.x - mx).powi(2)).sum();
    let sxy: f64 = brackets
        .iter()
        .map(|br| w(br) * (br.x - mx) * (br.mid() - my))
        .sum();
    if brackets.len() < 2 || sxx <= 0.0 {
        return None;
    }
    let b = sxy / sxx;
    Some(Line { a: my - b * mx, b })
}

/// (max of `hi − b·x`, min of `lo − b·x`).
fn envelope(brackets: &[Bracket], b: f64) -> (f64, f64) {
    brackets
        .iter()
        .fold((f64::NEG_INFINITY, f64::INFINITY), |(top, bottom), br| {
            (top.max(br.hi - b * br.x), bottom.min(br.lo - b * br.x))
        })
}

/// Minimum of a convex function on `[lo, hi]`: (argmin, min).
fn convex_min(f: impl Fn(f64) -> f64, mut lo: f64, mut hi: f64) -> (f64, f64) {
    for _ in 0..200 {
        let m1 = lo + (hi - lo) / 3.0;
        let m2 = hi - (hi - lo) / 3.0;
        if f(m1) < f(m2) {
            hi = m2;
        } else {
            lo = m1;
        }
        if hi - lo < 1e-18 {
            break;
        }
    }
    let b = (lo + hi) / 2.0;
    (b, f(b))
}

/// The edge of `{b : f(b) ≤ level}` between `inside` (where f ≤ level) and
/// `outside`, by bisection (f convex).
fn sublevel_edge(f: &impl Fn(f64) -> f64, level: f64, mut inside: f64, outside: f64) -> f64 {
    if f(outside) <= level {
        return outside;
    }
    let mut outside = outside;
    for _ in 0..100 {
        let m = (inside + outside) / 2.0;
        if f(m) <= level {
            inside = m;
        } else {
            outside = m;
        }
    }
    inside
}

/// Result of [`minimax`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MinimaxFit {
    pub line: Line,
    /// Largest distance from the line to the far end of a bracket.
    pub bound: f64,
    /// Slopes that reach the same bound (the line's slope is one of them).
    pub slope_range: (f64, f64),
}

/// The line minimising the largest distance to the brackets' far ends; among
/// equally good slopes, the one closest to `slope_hint`. Needs at least one
/// bracket.
pub fn minimax(brackets: &[Bracket], slope_hint: f64) -> MinimaxFit {
    let f = |b: f64| {
        let (top, bottom) = envelope(brackets, b);
        top - bottom
    };
    let (b_opt, f_min) = convex_min(f, -MAX_SLOPE, MAX_SLOPE);
    // Tolerance: float noise of values of up to ~1e12 ns, and 1 ps.
    let level = f_min + 1e-3 + 1e-12 * f_min.abs();
    let low = sublevel_edge(&f, level, b_opt, -MAX_SLOPE);
    let high = sublevel_edge(&f, level, b_opt, MAX_SLOPE);
    let b = slope_hint.clamp(low, high);
    let (top, bottom) = envelope(brackets, b);
    let line = Line {
        a: (top + bottom) / 2.0,
        b,
    };
    MinimaxFit {
        line,
        bound: line.worst_distance(brackets),
        slope_range: (low, high),
    }
}

/// How far the brackets are from admitting one straight line: `min g / 2`
/// (see the module comment). ≤ 0 when a line passes through all of them.
pub fn excess_over_line(brackets: &[Bracket]) -> f64 {
    let g = |b: f64| {
        let lo_top = brackets
            .iter()
            .map(|br| br.lo - b * br.x)
            .fold(f64::NEG_INFINITY, f64::max);
        let hi_bottom = brackets
            .iter()
            .map(|br| br.hi - b * br.x)
            .fold(f64::INFINITY, f64::min);
        lo_top - hi_bottom
    };
    convex_min(g, -MAX_SLOPE, MAX_SLOPE).1 / 2.0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn br(x: f64, lo: f64, hi: f64) -> Bracket {
        Bracket { x, lo, hi }
    }

    #[test]
    fn the_minimax_line_through_equal_brackets_on_a_line_is_that_line() {
        // truth y = 5 + 2e-5 x, brackets ±10 around it
        let v: Vec<Bracket> = (0..20)
            .map(|i| {
                let x = i as f64 * 1e6;
                let y = 5.0 + 2e-5 * x;
                br(x, y - 10.0, y + 10.0)
            })
            .collect();
        let fit = minimax(&v, least_squares(&v).unwrap().b);
        assert!((fit.line.b - 2e-5).abs() < 1e-12, "{fit:?}");
        assert!((fit.line.a - 5.0).abs() < 1e-6, "{fit:?}");
        assert!((fit.bound - 10.0).abs() < 1e-6, "{fit:?}");
        assert!(excess_over_line(&v) <= 0.0);
    }

    #[test]
    fn the_minimax_bound_is_never_above_what_a_least_squares_line_gives() {
        let v = vec![
            br(0.0, -3.0, 7.0),
            br(1e6, 10.0, 12.0),
            br(2e6, -1.0, 30.0),
            br(3e6, 4.0, 5.0),
        ];
        let ls = least_squares(&v).unwrap();
        let fit = minimax(&v, ls.b);
        assert!(fit.bound <= ls.worst_distance(&v) + 1e-6, "{fit:?} {ls:?}");
        assert!(fit.slope_range.0 <= fit.line.b && fit.line.b <= fit.slope_range.1);
    }

    #[test]
    fn brackets_that_no_line_crosses_report_how_far_they_are_from_one() {
        // A kink: 0 at x=0 and x=2, 100 at x=1, brackets ±10. The best line
        // is y = 50: it misses every bracket by 40, and is 60 from their far
        // ends.
        let v = vec![
            br(0.0, -10.0, 10.0),
            br(1.0, 90.0, 110.0),
            br(2.0, -10.0, 10.0),
        ];
        let e = excess_over_line(&v);
        assert!((e - 40.0).abs() < 1e-6, "{e}");
        let fit = minimax(&v, 0.0);
        assert!((fit.bound - 60.0).abs() < 1e-6, "{fit:?}");
        assert!((fit.line.a - 50.0).abs() < 1e-6, "{fit:?}");
    }
}
