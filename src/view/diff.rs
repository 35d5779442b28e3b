//! A line diff of two texts for the page: the common head and tail are set aside, and the
//! middle is compared line by line (longest common subsequence) when it is small enough; a
//! larger middle is shown as all its old lines removed and all its new lines added. Unchanged
//! runs are cut to a few lines of context. Bounded in lines shown.

/// One line of a diff.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Line<'a> {
    Same(&'a str),
    Removed(&'a str),
    Added(&'a str),
    /// Unchanged lines left out (how many).
    Skipped(usize),
}

/// The most cells (old lines × new lines of the middle) compared line by line.
const LCS_CELLS: usize = 4_000_000;

/// Lines of unchanged context kept around each change.
const CONTEXT: usize = 3;

/// The diff of `old` and `new` (lines without their `\n`), at most `max_lines` of it; the bool
/// says whether lines were left out past that.
pub fn lines<'a>(old: &'a str, new: &'a str, max_lines: usize) -> (Vec<Line<'a>>, bool) {
    let a: Vec<&str> = old.lines().collect();
    let b: Vec<&str> = new.lines().collect();
    let head = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let tail = a[head..]
        .iter()
        .rev()
        .zip(b[head..].iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    let (ma, mb) = (&a[head..a.len() - tail], &b[head..b.len() - tail]);
    let mut all: Vec<Line<'a>> = a[..head].iter().map(|l| Line::Same(l)).collect();
    all.extend(middle(ma, mb));
    all.extend(a[a.len() - tail..].iter().map(|l| Line::Same(l)));
    let mut shown = with_context(all);
    let cut = shown.len() > max_lines;
    shown.truncate(max_lines);
    (shown, cut)
}

fn middle<'a>(a: &[&'a str], b: &[&'a str]) -> Vec<Line<'a>> {
    if a.is_empty() || b.is_empty() || a.len().saturating_mul(b.len()) > LCS_CELLS {
        let mut out: Vec<Line<'a>> = a.iter().map(|l| Line::Removed(l)).collect();
        out.extend(b.iter().map(|l| Line::Added(l)));
        return out;
    }
    // lcs[i][j]: the longest common subsequence of a[i..] and b[j..].
    let w = b.len() + 1;
    let mut lcs = vec![0u32; (a.len() + 1) * w];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            lcs[i * w + j] = if a[i] == b[j] {
                lcs[(i + 1) * w + j + 1] + 1
            } else {
                lcs[(i + 1) * w + j].max(lcs[i * w + j + 1])
            };
        }
    }
    let (mut i, mut j) = (0, 0);
    let mut out = Vec::with_capacity(a.len() + b.len());
    while i < a.len() && j < b.len() {
        if a[i] == b[j] {
            out.push(Line::Same(a[i]));
            i += 1;
            j += 1;
        } else if lcs[(i + 1) * w + j] >= lcs[i * w + j + 1] {
            out.push(Line::Removed(a[i]));
            i += 1;
        } else {
            out.push(Line::Added(b[j]));
            j += 1;
        }
    }
    out.extend(a[i..].iter().map(|l| Line::Removed(l)));
    out.extend(b[j..].iter().map(|l| Line::Added(l)));
    out
}

/// Unchanged runs longer than twice the context become one `Skipped`.
fn with_context(all: Vec<Line<'_>>) -> Vec<Line<'_>> {
    let changed: Vec<bool> = all.iter().map(|l| !matches!(l, Line::Same(_))).collect();
    let mut out = Vec::with_capacity(all.len());
    let mut i = 0;
    while i < all.len() {
        if changed[i] {
            out.push(all[i]);
            i += 1;
            continue;
        }
        let start = i;
        while i < all.len() && !changed[i] {
            i += 1;
        }
        let keep_before = if start == 0 { 0 } else { CONTEXT };
        let keep_after = if i == all.len() { 0 } else { CONTEXT };
        let run = i - start;
        if run > keep_before + keep_after + 1 {
            out.extend_from_slice(&all[start..start + keep_before]);
            out.push(Line::Skipped(run - keep_before - keep_after));
            out.extend_from_slice(&all[i - keep_after..i]);
        } else {
            out.extend_from_slice(&all[start..i]);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::Line::*;
    use super::*;

    #[test]
    fn a_changed_line_is_removed_then_added_with_context() {
        let old = "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n";
        let new = "1\n2\n3\n4\n5\nsix\n7\n8\n9\n10\n";
        let (d, cut) = lines(old, new, 100);
        assert!(!cut);
        assert_eq!(
            d,
            vec![
                Skipped(2),
                Same("3"),
                Same("4"),
                Same("5"),
                Removed("6"),
                Added("six"),
                Same("7"),
                Same("8"),
                Same("9"),
                Same("10")
            ],
            "one unchanged line is shown, not skipped"
        );
    }

    #[test]
    fn insertions_in_the_middle_are_found() {
        let (d, _) = lines("a\nb\nc\n", "a\nx\nb\ny\nc\n", 100);
        assert_eq!(
            d,
            vec![Same("a"), Added("x"), Same("b"), Added("y"), Same("c")]
        );
    }

    #[test]
    fn a_new_file_is_all_added_and_the_bound_holds() {
        let new: String = (0..50).map(|i| format!("{i}\n")).collect();
        let (d, cut) = lines("", &new, 10);
        assert!(cut);
        assert_eq!(d.len(), 10);
        assert!(d.iter().all(|l| matches!(l, Added(_))));
    }

    #[test]
    fn a_middle_too_large_to_compare_is_replaced_whole() {
        let old: String = (0..2100).map(|i| format!("o{i}\n")).collect();
        let new: String = (0..2100).map(|i| format!("n{i}\n")).collect();
        let (d, _) = lines(&old, &new, 10_000);
        assert_eq!(d.len(), 4200);
        assert!(matches!(d[0], Removed("o0")));
        assert!(matches!(d[2100], Added("n0")));
    }
}
