//! The least-cost alignment of one pattern with a phrase's stems, and the scores it gives
//! (fractions of matched parts, see the matcher's module documentation).

use std::cmp::Ordering;
use std::collections::BTreeMap;

use super::patterns::{Gazetteer, Hit, Part, Pattern};
use crate::nlu::content::SlotDecl;

/// One slot filled by an alignment.
#[derive(Debug, Clone)]
pub(super) struct Fill {
    pub(super) start: usize,
    pub(super) end: usize,
    pub(super) hits: Vec<Hit>,
}

/// The best alignment of one pattern with a phrase.
#[derive(Debug, Clone)]
pub(super) struct Aligned {
    pub(super) matched: usize,
    pub(super) parts: usize,
    pub(super) extra: usize,
    pub(super) fills: Vec<Option<Fill>>,
}

impl Aligned {
    /// Score as a fraction (numerator, denominator).
    pub(super) fn score(&self) -> (usize, usize) {
        (self.matched, self.parts + self.extra)
    }
}

/// `a` compared with `b` as fractions.
pub(super) fn cmp_fraction(a: (usize, usize), b: (usize, usize)) -> Ordering {
    (a.0 * b.1).cmp(&(b.0 * a.1))
}

pub(super) fn score_value((num, den): (usize, usize)) -> f64 {
    if den == 0 {
        return 0.0;
    }
    (num as f64 / den as f64 * 10_000.0).round() / 10_000.0
}

#[derive(Debug, Clone, Copy)]
pub(super) enum Step {
    Start,
    Extra,
    Skip,
    Word,
    Slot(usize),
}

/// The least-cost alignment of `pattern` with `stems` (see the module documentation).
pub(super) fn align(
    pattern: &Pattern,
    slots: &[SlotDecl],
    stems: &[String],
    kinds: &BTreeMap<String, Gazetteer>,
) -> Aligned {
    let n = pattern.parts.len();
    let m = stems.len();
    let at = |i: usize, j: usize| i * (m + 1) + j;
    let mut best: Vec<Option<(usize, usize)>> = vec![None; (n + 1) * (m + 1)];
    let mut back = vec![Step::Start; (n + 1) * (m + 1)];
    best[at(0, 0)] = Some((0, 0));
    let relax = |best: &mut Vec<Option<(usize, usize)>>,
                 back: &mut Vec<Step>,
                 to: usize,
                 cost: (usize, usize),
                 step: Step| {
        if best[to].is_none_or(|b| cost < b) {
            best[to] = Some(cost);
            back[to] = step;
        }
    };
    for i in 0..=n {
        for j in 0..=m {
            let Some((cost, skipped)) = best[at(i, j)] else {
                continue;
            };
            if j < m {
                relax(
                    &mut best,
                    &mut back,
                    at(i, j + 1),
                    (cost + 1, skipped),
                    Step::Extra,
                );
            }
            if i == n {
                continue;
            }
            relax(
                &mut best,
                &mut back,
                at(i + 1, j),
                (cost + 1, skipped + 1),
                Step::Skip,
            );
            match &pattern.parts[i] {
                Part::Word(w) => {
                    if j < m && &stems[j] == w {
                        relax(
                            &mut best,
                            &mut back,
                            at(i + 1, j + 1),
                            (cost, skipped),
                            Step::Word,
                        );
                    }
                }
                Part::Slot(s) => {
                    let Some(g) = slots.get(*s).and_then(|s| kinds.get(&s.kind)) else {
                        continue;
                    };
                    for len in 1..=g.max_words.min(m - j) {
                        if g.forms.contains_key(&stems[j..j + len].join(" ")) {
                            relax(
                                &mut best,
                                &mut back,
                                at(i + 1, j + len),
                                (cost, skipped),
                                Step::Slot(len),
                            );
                        }
                    }
                }
            }
        }
    }
    let (cost, skipped) = best[at(n, m)].unwrap_or((n + m, n));
    let mut fills = vec![None; slots.len()];
    let (mut i, mut j) = (n, m);
    while i > 0 || j > 0 {
        match back[at(i, j)] {
            Step::Start => break,
            Step::Extra => j -= 1,
            Step::Skip => i -= 1,
            Step::Word => {
                i -= 1;
                j -= 1;
            }
            Step::Slot(len) => {
                i -= 1;
                j -= len;
                if let Part::Slot(s) = &pattern.parts[i]
                    && let Some(g) = slots.get(*s).and_then(|d| kinds.get(&d.kind))
                {
                    let hits = g
                        .forms
                        .get(&stems[j..j + len].join(" "))
                        .cloned()
                        .unwrap_or_default();
                    fills[*s] = Some(Fill {
                        start: j,
                        end: j + len,
                        hits,
                    });
                }
            }
        }
    }
    Aligned {
        matched: n - skipped,
        parts: n,
        extra: cost - skipped,
        fills,
    }
}
